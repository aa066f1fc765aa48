package etcd_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// logLines is a slog.Handler keeping "LEVEL msg k=v" lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
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

// count returns how many lines start with prefix and contain all of sub.
func (l *logLines) count(prefix string, sub ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.lines {
		if !strings.HasPrefix(s, prefix) {
			continue
		}
		for _, x := range sub {
			if !strings.Contains(s, x) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
