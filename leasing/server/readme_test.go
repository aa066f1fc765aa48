package server_test

import (
	"os"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/leasing/server"
)

// readmeConfig returns the YAML block of docs/doorman.md's "Doorman
// config" section: the fenced block between the doorman-config markers.
func readmeConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/doorman.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- doorman-config -->", "<!-- /doorman-config -->"
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/doorman.md has no %s ... %s block", begin, end)
	}
	block := strings.TrimSpace(s[i+len(begin) : j])
	const fence = "```yaml\n"
	if !strings.HasPrefix(block, fence) || !strings.HasSuffix(block, "\n```") {
		t.Fatalf("the doorman-config block of docs/doorman.md is not one ```yaml fenced block:\n%s", block)
	}
	return strings.TrimSuffix(strings.TrimPrefix(block, fence), "```")
}

// The README's Doorman config loads, a server starts with it, its
// templates match as its comments say, and the error the README quotes for
// a broken copy of it is the one ParseConfig gives.
func TestREADMEDoormanConfig(t *testing.T) {
	yaml := readmeConfig(t)
	cfg, err := server.ParseRepository([]byte(yaml))
	if err != nil {
		t.Fatalf("the README's Doorman config does not load: %v", err)
	}
	srv, err := server.New(server.Config{Repository: cfg})
	if err != nil {
		t.Fatalf("a server does not start with the README's Doorman config: %v", err)
	}
	srv.Stop()

	for _, tt := range []struct {
		id, glob string
		kind     server.Kind
	}{
		{"kv-rps", "kv-rps", server.FairShare},
		{"db-users", "db-*", server.Static},
		{"search-rps", "*", server.ProportionalShare},
	} {
		tmpl := cfg.Match(tt.id)
		if tmpl == nil || tmpl.IdentifierGlob != tt.glob || tmpl.Algorithm.Kind != tt.kind {
			t.Errorf("Match(%q) = %+v, want the %q template (%v)", tt.id, tmpl, tt.glob, tt.kind)
		}
	}
	kv := cfg.Match("kv-rps")
	if kv.SafeCapacity == nil || *kv.SafeCapacity != 25 || kv.LearningDuration().Seconds() != 60 {
		t.Errorf("kv-rps template: %+v", kv)
	}
	if db := cfg.Match("db-users"); db.LearningDuration().Seconds() != 300 {
		t.Errorf("db-* learns for %v, want its lease_length (learning_mode_duration omitted)", db.LearningDuration())
	}
	if all := cfg.Match("x"); all.LearningDuration() != 0 {
		t.Errorf("the * template learns for %v, want 0", all.LearningDuration())
	}

	// The README quotes the error of db-*'s refresh_interval set to 600.
	const good = "      lease_length: 300\n      refresh_interval: 60\n"
	if strings.Count(yaml, good) != 1 {
		t.Fatalf("the db-* template no longer has lease_length 300 and refresh_interval 60:\n%s", yaml)
	}
	_, err = server.ParseRepository([]byte(strings.Replace(yaml, good, "      lease_length: 300\n      refresh_interval: 600\n", 1)))
	const quoted = `server: template 1 ("db-*"): algorithm refresh_interval is 600, must be > 0 and <= lease_length (300)`
	if err == nil || err.Error() != quoted {
		t.Errorf("refresh_interval 600: error %v, want the README's %q", err, quoted)
	}
	readme, _ := os.ReadFile("../../docs/doorman.md")
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "`"+quoted+"`") {
		t.Errorf("README.md no longer quotes %q", quoted)
	}
}
