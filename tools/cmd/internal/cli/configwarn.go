package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// configWarnings returns the logger of a Channel's warnings
// (channel.WithLogger): a line each on w, the command's stderr.
func configWarnings(w io.Writer) *slog.Logger { return LineLogger(w, slog.LevelWarn) }

// LineLogger returns a logger writing the records at min and above to w,
// one line each: the time, the message, then its attributes.
func LineLogger(w io.Writer, min slog.Level) *slog.Logger {
	return slog.New(&lineHandler{w: Locked(w), min: min})
}

// lineHandler is a slog.Handler that writes records at min and above as
// lines to w, a line a Write. Groups are not kept: Sluice logs none.
type lineHandler struct {
	w     io.Writer
	min   slog.Level
	attrs []slog.Attr
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", t.UTC().Format("2006-01-02T15:04:05.000Z"), r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	b.WriteString("\n")
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineHandler{w: h.w, min: h.min, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
