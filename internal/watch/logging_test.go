package watch_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slogtest"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	"github.com/sluice-rpc/sluice/internal/watch"
)

func watchLogged(t *testing.T, log *slog.Logger) (scripted, *watch.Watcher) {
	t.Helper()
	res := scripted{make(chan func(discovery.Updates))}
	w, err := watch.New(watch.Config{Resolver: res, Clock: clock.NewFake(time.Unix(1000, 0)), Logger: log,
		Apply: func([]discovery.Address) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return res, w
}

// A resolver that starts failing is logged once at Warn, each further
// failure at Debug only, and its recovery at Info.
func TestWatcherLogsFailuresOncePerChange(t *testing.T) {
	log := &slogtest.Lines{Floor: slog.LevelInfo}
	res, _ := watchLogged(t, slog.New(log))
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}}) })
	for range 5 {
		res.do(func(u discovery.Updates) { u.Error(errors.New("SERVFAIL")) })
	}
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:2"}}) })
	if log.CountPrefix("WARN discovery: the resolver failed") != 1 || log.CountPrefix("INFO discovery: the resolver answers again target=scripted:test") != 1 || log.Len() != 2 {
		t.Fatalf("5 failures then an answer logged:\n%s\nwant one Warn line and one Info line", log.String())
	}
}

// A registry whose answers are all bad, read with Debug on, gives at most
// ratelog.Burst lines however many answers come (the clock is frozen).
func TestWatcherLinesAreRateLimited(t *testing.T) {
	log := &slogtest.Lines{Floor: slog.LevelDebug}
	res, _ := watchLogged(t, slog.New(log))
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}}) })
	for range 100 {
		res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "not an address"}}) })
	}
	if n := log.Len(); n != ratelog.Burst {
		t.Fatalf("100 bad answers made %d lines, want %d:\n%s", n, ratelog.Burst, log.String())
	}
}

// With no Logger, a failing resolver is logged on slog.Default() at Warn.
func TestWatcherLogsOnSlogDefault(t *testing.T) {
	log := &slogtest.Lines{Floor: slog.LevelInfo}
	prev := slog.Default()
	slog.SetDefault(slog.New(log))
	defer slog.SetDefault(prev)
	res, _ := watchLogged(t, nil)
	res.do(func(u discovery.Updates) { u.Error(errors.New("SERVFAIL")) })
	if log.CountPrefix("WARN discovery: the resolver failed; the last good set stays target=scripted:test error=SERVFAIL") != 1 {
		t.Fatalf("slog.Default() got:\n%s\nwant one Warn line", log.String())
	}
}
