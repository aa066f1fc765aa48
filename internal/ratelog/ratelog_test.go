package ratelog

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type lines struct {
	mu  sync.Mutex
	got []string
	min slog.Level
}

func (h *lines) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }
func (h *lines) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *lines) WithGroup(string) slog.Handler                { return h }
func (h *lines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	h.mu.Lock()
	h.got = append(h.got, b.String())
	h.mu.Unlock()
	return nil
}

// A flood gives Burst lines; a second later the next line counts the
// rest; lines the logger does not write take nothing from the budget.
func TestFloodIsBounded(t *testing.T) {
	h := &lines{min: slog.LevelWarn}
	var now time.Time
	r := New(slog.New(h), func() time.Time { return now })
	for i := 0; i < 1000; i++ {
		r.Debug("detail") // not written: costs nothing
	}
	for i := 0; i < 1000; i++ {
		r.Warn("bad request", slog.Int("i", i))
	}
	if len(h.got) != Burst {
		t.Fatalf("1000 warnings made %d lines, want %d", len(h.got), Burst)
	}
	now = now.Add(time.Second)
	r.Warn("bad request")
	if want := "bad request suppressedBefore=990"; h.got[len(h.got)-1] != want {
		t.Errorf("the next line is %q, want %q", h.got[len(h.got)-1], want)
	}
}

// With no logger, lines go to slog.Default() as it is when written.
func TestDefault(t *testing.T) {
	h := &lines{min: slog.LevelWarn}
	r := New(nil, nil)
	prev := slog.Default()
	slog.SetDefault(slog.New(h))
	defer slog.SetDefault(prev)
	r.Warn("hello")
	if len(h.got) != 1 || h.got[0] != "hello" {
		t.Errorf("slog.Default() got %q, want [hello]", h.got)
	}
}
