package retry

import (
	"math"
	"strconv"
	"time"
)

// PushbackHeader is the application header a server sets in its response to
// tell the client when to retry: an ASCII int32 number of milliseconds, or a
// negative number for "do not retry" (FormatPushback writes it). A Sluice
// server puts the same value at the end of a TChannel Busy or Declined
// error message, as " retry-pushback-ms=N" (channel.BusyAfter does), where
// a Sluice client reads it too; other TChannel peers ignore it.
const PushbackHeader = "retry-pushback-ms"

// PushbackKind says what a server's pushback asks for.
type PushbackKind uint8

const (
	// PushbackNone means the server said nothing; the policy's backoff applies.
	PushbackNone PushbackKind = iota
	// PushbackDelay means retry after exactly Pushback.Delay.
	PushbackDelay
	// PushbackStop means do not retry (a negative or unparsable value).
	PushbackStop
)

// Pushback is a server's instruction about retrying, as a small value. The
// zero value is PushbackNone.
type Pushback struct {
	// Kind is what the server asked for.
	Kind PushbackKind
	// Delay is the wait the server asked for; it is meaningful only when
	// Kind is PushbackDelay, and then it is >= 0.
	Delay time.Duration
}

// PushbackAfter returns a pushback asking to retry after exactly d, or to
// stop retrying when d is negative.
func PushbackAfter(d time.Duration) Pushback {
	if d < 0 {
		return Pushback{Kind: PushbackStop}
	}
	return Pushback{Kind: PushbackDelay, Delay: d}
}

// PushbackStopped returns a pushback asking not to retry.
func PushbackStopped() Pushback { return Pushback{Kind: PushbackStop} }

// String describes p: "none", "stop" or "delay 150ms".
func (p Pushback) String() string {
	switch p.Kind {
	case PushbackNone:
		return "none"
	case PushbackStop:
		return "stop"
	case PushbackDelay:
		return "delay " + p.Delay.String()
	}
	return "Pushback(" + strconv.Itoa(int(p.Kind)) + ")"
}

// FormatPushback returns p as a retry-pushback-ms header value: the delay in
// whole milliseconds (rounded up, at most the int32 maximum) or "-1" for
// PushbackStop. It returns "" for PushbackNone: send no header then.
func FormatPushback(p Pushback) string {
	switch p.Kind {
	case PushbackDelay:
		return strconv.FormatInt(pushbackMillis(p.Delay), 10)
	case PushbackStop:
		return "-1"
	}
	return ""
}

func pushbackMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return min(int64(ms), math.MaxInt32)
}
