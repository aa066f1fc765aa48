package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

func reloadConfig(capacity string) string {
	return `
resources:
- identifier_glob: r
  capacity: ` + capacity + `
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15, learning_mode_duration: 0}
`
}

// writeAtomically replaces file with text through a rename, as a careful
// deployment does.
func writeAtomically(t *testing.T, file, text string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// The file watcher applies a good new configuration, refuses a bad one
// whole (the one in force stays, even its valid templates unchanged),
// says so once however often it reads it, logs a missing file once, and
// picks up the next good one; it stops with its context.
func TestWatchFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doorman.yaml")
	writeAtomically(t, file, reloadConfig("100"))
	repo, err := LoadRepository(file)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(testEpoch)
	s := newTestServer(t, repo, clk)
	var log slogtest.Lines
	r := NewReloader(s, ReloadConfig{Logger: log.Logger()})
	data, _ := os.ReadFile(file)
	r.Loaded(data)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchFile(ctx, file, time.Second, r) }()
	// tick lets the watcher read the file once and waits until it is
	// waiting again.
	tick := func() {
		t.Helper()
		testwait.Timers(t, clk, 1)
		clk.Add(time.Second)
		testwait.Timers(t, clk, 1)
	}

	if got := ask(t, s, "a", 200); got != 100 {
		t.Fatalf("a got %v, want 100", got)
	}
	tick() // unchanged: nothing to do, nothing logged
	if log.String() != "" {
		t.Fatalf("an unchanged file was logged: %s", log.String())
	}

	writeAtomically(t, file, reloadConfig("40"))
	tick()
	if got := ask(t, s, "a", 200); got != 40 || log.Count("configuration from "+file+" applied: 1 templates") != 1 {
		t.Fatalf("after the change a got %v, want 40; log:\n%s", got, log.String())
	}

	// A bad configuration, whose first template alone would be valid, is
	// refused whole.
	bad := reloadConfig("10") + `- identifier_glob: x
  capacity: -1
  algorithm: {kind: FAIR_SHARE, lease_length: 60, refresh_interval: 15}
`
	writeAtomically(t, file, bad)
	tick()
	tick()
	want := `configuration from ` + file + ` refused, the one in force stays: server: template 1 ("x"): capacity is -1, must be a finite number >= 0`
	if n := log.Count(want); n != 1 {
		t.Errorf("the refusal is logged %d times, want once; log:\n%s", n, log.String())
	}
	if got := ask(t, s, "a", 200); got != 40 {
		t.Errorf("after a refused configuration a got %v, want 40 (the one in force)", got)
	}
	if err := r.Apply([]byte(bad), file); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Apply(bad) = %v, want %q", err, want)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	tick()
	tick()
	if n := log.Count("reading configuration: open " + file); n != 1 {
		t.Errorf("a missing file is logged %d times, want once; log:\n%s", n, log.String())
	}

	writeAtomically(t, file, reloadConfig("70"))
	tick()
	if got := ask(t, s, "a", 200); got != 70 {
		t.Errorf("after a good configuration a got %v, want 70; log:\n%s", got, log.String())
	}
	cancel()
	if err := testwait.Recv(t, done, "WatchFile to return"); err != nil {
		t.Errorf("WatchFile returned %v when its context ended", err)
	}
}

// A real clock and a short interval: the file's change is applied within
// a few reads.
func TestWatchFileRealClock(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doorman.yaml")
	writeAtomically(t, file, reloadConfig("100"))
	repo, err := LoadRepository(file)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, repo, nil)
	r := NewReloader(s, ReloadConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchFile(ctx, file, 5*time.Millisecond, r) }()
	// Written in place, not renamed: the watcher may catch it half-written
	// and refuse it, then applies it at the next read.
	if err := os.WriteFile(file, []byte(reloadConfig("25")), 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the new capacity to be in force", func() bool { return ask(t, s, "a", 200) == 25 })
	cancel()
	testwait.Recv(t, done, "WatchFile to return")
}

func TestWatchFileRejectsBadArguments(t *testing.T) {
	s := newTestServer(t, testConfig(FairShare, 1), nil)
	r := NewReloader(s, ReloadConfig{})
	for _, tc := range []struct {
		file     string
		interval time.Duration
		want     string
	}{
		{"", 0, "server: WatchFile: file is empty"},
		{"x.yaml", -time.Second, "server: WatchFile: interval is -1s, must be >= 0"},
	} {
		if err := WatchFile(context.Background(), tc.file, tc.interval, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WatchFile(%q, %v) = %v, want %q", tc.file, tc.interval, err, tc.want)
		}
	}
}

// An empty configuration, which a file rewritten in place reads for a
// moment, is refused.
func TestReloaderRefusesEmptyConfiguration(t *testing.T) {
	s := newTestServer(t, testConfig(FairShare, 100), nil)
	r := NewReloader(s, ReloadConfig{})
	for _, data := range []string{"", "# nothing\n", "resources: []\n"} {
		if err := r.Apply([]byte(data), "f.yaml"); err == nil || !strings.Contains(err.Error(), "configuration from f.yaml refused, the one in force stays: it has no templates") {
			t.Errorf("Apply(%q) = %v", data, err)
		}
	}
	if got := ask(t, s, "a", 200); got != 100 {
		t.Errorf("a got %v, want 100", got)
	}
}
