package main

import (
	"context"
	"strings"
	"testing"
)

func runHostile(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = hostileRun(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// -h describes the command, lists the attacks and shows examples, on
// stdout, and exits 0.
func TestHostileHelp(t *testing.T) {
	code, out, errOut := runHostile(t, "-h")
	if code != 0 || errOut != "" {
		t.Errorf("-h: exit %d, stderr %q; want 0 and nothing on stderr", code, errOut)
	}
	for _, want := range []string{"usage: sluice-lab hostile", "Attacks: checksum, checksum-client, stall-handshaken", "Examples:",
		"--server-bin PATH", "--target 127.0.0.1:PORT", "--ci"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q:\n%s", want, out)
		}
	}
}

// Usage errors exit 2 having attacked nothing.
func TestHostileBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--attacks", "flood"},
		{"--max-conns", "-1"},
		{"--target", "10.0.0.1:4040", "--pid", "1"},
		{"--target", "127.0.0.1:4040"},
		{"--server-bin", "/nonexistent/sluice"},
		{"--ci", "checksum"},
	} {
		code, out, errOut := runHostile(t, args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and an error", args, code, out, errOut)
		}
	}
}
