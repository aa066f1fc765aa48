package watch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/ratelog"
	"github.com/sluice-rpc/sluice/internal/watch"
)

// logLines is a slog.Handler keeping "LEVEL msg k=v" lines, at min and
// above.
type logLines struct {
	min   slog.Level
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(_ context.Context, lv slog.Level) bool { return lv >= l.min }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logLines) WithGroup(string) slog.Handler                 { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	return nil
}

func (l *logLines) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

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
	log := &logLines{min: slog.LevelInfo}
	res, _ := watchLogged(t, slog.New(log))
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}}) })
	for range 5 {
		res.do(func(u discovery.Updates) { u.Error(errors.New("SERVFAIL")) })
	}
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:2"}}) })
	if log.count("WARN discovery: the resolver failed") != 1 || log.count("INFO discovery: the resolver answers again target=scripted:test") != 1 || len(log.lines) != 2 {
		t.Fatalf("5 failures then an answer logged:\n%s\nwant one Warn line and one Info line", log.String())
	}
}

// A registry whose answers are all bad, read with Debug on, gives at most
// ratelog.Burst lines however many answers come (the clock is frozen).
func TestWatcherLinesAreRateLimited(t *testing.T) {
	log := &logLines{min: slog.LevelDebug}
	res, _ := watchLogged(t, slog.New(log))
	res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "127.0.0.1:1"}}) })
	for range 100 {
		res.do(func(u discovery.Updates) { u.Update([]discovery.Address{{HostPort: "not an address"}}) })
	}
	if n := len(log.lines); n != ratelog.Burst {
		t.Fatalf("100 bad answers made %d lines, want %d:\n%s", n, ratelog.Burst, log.String())
	}
}

// With no Logger, a failing resolver is logged on slog.Default() at Warn.
func TestWatcherLogsOnSlogDefault(t *testing.T) {
	log := &logLines{min: slog.LevelInfo}
	prev := slog.Default()
	slog.SetDefault(slog.New(log))
	defer slog.SetDefault(prev)
	res, _ := watchLogged(t, nil)
	res.do(func(u discovery.Updates) { u.Error(errors.New("SERVFAIL")) })
	if log.count("WARN discovery: the resolver failed; the last good set stays target=scripted:test error=SERVFAIL") != 1 {
		t.Fatalf("slog.Default() got:\n%s\nwant one Warn line", log.String())
	}
}
