// Package slogtest keeps the lines a *slog.Logger writes, for tests that
// check what Sluice logs: each record as one "LEVEL msg k=v k=v" line.
package slogtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Lines is a slog.Handler that keeps each record it is given as a line
// "LEVEL msg k=v k=v". The zero value keeps every level; Floor, if set,
// keeps only records at it and above (the others are not Enabled, as a
// handler at that level would drop them). It is safe for concurrent use.
type Lines struct {
	Floor slog.Leveler

	mu    sync.Mutex
	lines []string
}

// Logger returns a logger writing to l.
func (l *Lines) Logger() *slog.Logger { return slog.New(l) }

// Enabled reports whether lv is at or above l's Floor.
func (l *Lines) Enabled(_ context.Context, lv slog.Level) bool {
	return l.Floor == nil || lv >= l.Floor.Level()
}

// WithAttrs returns l: the lines carry a record's own attributes only.
func (l *Lines) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *Lines) WithGroup(string) slog.Handler { return l }

// Handle keeps r as a line.
func (l *Lines) Handle(_ context.Context, r slog.Record) error {
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

// Count returns how many lines contain sub.
func (l *Lines) Count(sub string) int { return l.CountPrefix("", sub) }

// CountPrefix returns how many lines start with prefix and contain every
// one of subs.
func (l *Lines) CountPrefix(prefix string, subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.lines {
		if !strings.HasPrefix(s, prefix) {
			continue
		}
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// Matching returns the lines that contain sub, in the order written.
func (l *Lines) Matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

// Has reports whether a line contains sub.
func (l *Lines) Has(sub string) bool { return l.Count(sub) > 0 }

// Len returns how many lines l has kept.
func (l *Lines) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// String returns the lines, one per line of text.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
