// Package ratelog writes the log lines a remote party can cause (a
// client's refused request, a registry's bad entry, a parent's failure)
// at a bounded rate, on a *slog.Logger: slog.Default() when none is
// given, read when a line is written. Lines past the rate are counted,
// and the next line written says how many were left out in the attribute
// suppressedBefore.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The default rate: Burst lines at once, then PerSecond.
const (
	PerSecond = 10
	Burst     = 10
)

// Logger writes lines through a slog.Logger within one budget shared by
// all its lines. The zero value is not usable; call New. Safe for
// concurrent use.
type Logger struct {
	l   *slog.Logger // nil: slog.Default() when a line is written
	now func() time.Time

	mu         sync.Mutex
	lim        *rate.Limiter
	suppressed int
}

// New returns a Logger writing through l (nil: slog.Default()) at most
// Burst lines at once and PerSecond after; now is its clock (nil:
// time.Now).
func New(l *slog.Logger, now func() time.Time) *Logger {
	if now == nil {
		now = time.Now
	}
	return &Logger{l: l, now: now, lim: rate.NewLimiter(PerSecond, Burst)}
}

// Slog returns the logger lines go to: l, or slog.Default().
func (r *Logger) Slog() *slog.Logger {
	if r.l == nil {
		return slog.Default()
	}
	return r.l
}

// Log writes msg at level with attrs, unless the logger does not write
// level (such lines take nothing from the budget) or the budget is
// spent.
func (r *Logger) Log(level slog.Level, msg string, attrs ...slog.Attr) {
	l := r.Slog()
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	r.mu.Lock()
	if !r.lim.AllowN(r.now(), 1) {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	if n > 0 {
		attrs = append(attrs[:len(attrs):len(attrs)], slog.Int("suppressedBefore", n))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}

// Warn is Log at slog.LevelWarn.
func (r *Logger) Warn(msg string, attrs ...slog.Attr) { r.Log(slog.LevelWarn, msg, attrs...) }

// Debug is Log at slog.LevelDebug.
func (r *Logger) Debug(msg string, attrs ...slog.Attr) { r.Log(slog.LevelDebug, msg, attrs...) }
