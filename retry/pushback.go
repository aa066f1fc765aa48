package retry

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// PushbackHeader is the application header a server sets in its response to
// tell the client when to retry: an ASCII int32 number of milliseconds, or a
// negative number for "do not retry".
const PushbackHeader = "retry-pushback-ms"

// pushbackHint is how a Sluice server appends the same value to the message
// of a TChannel error frame: " retry-pushback-ms=N" at the very end.
const pushbackHint = PushbackHeader + "="

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

// ParsePushback reads a retry-pushback-ms header value: an ASCII signed
// 32-bit decimal integer, optionally surrounded by spaces or tabs. A value
// N >= 0 asks to retry after exactly N milliseconds; a negative or
// unparsable value (including the empty string) asks not to retry, as the
// gRPC design says. It never returns PushbackNone: call it only when the
// header is present. It does not allocate for a well-formed value.
func ParsePushback(v string) Pushback {
	n, ok := parseInt32(strings.Trim(v, " \t"))
	if !ok || n < 0 {
		return Pushback{Kind: PushbackStop}
	}
	return Pushback{Kind: PushbackDelay, Delay: time.Duration(n) * time.Millisecond}
}

// parseInt32 parses [-+]?[0-9]+ within the int32 range (strconv with base
// 10 accepts exactly that).
func parseInt32(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return n, err == nil
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

// AppendPushback returns msg with the pushback hint a Sluice server puts at
// the end of a TChannel error message: msg + " retry-pushback-ms=N" (no
// leading space when msg is empty). PushbackNone returns msg unchanged.
// PushbackFromMessage reverses it.
func AppendPushback(msg string, p Pushback) string {
	v := FormatPushback(p)
	if v == "" {
		return msg
	}
	if msg == "" {
		return pushbackHint + v
	}
	return msg + " " + pushbackHint + v
}

// PushbackFromMessage reads the pushback hint from the end of a TChannel
// error message. The hint is the message's last space-separated word when
// that word starts with "retry-pushback-ms="; its value is read like
// ParsePushback reads a header (unparsable means PushbackStop). It returns
// the pushback and the message without the hint and the space before it;
// a message with no hint gives PushbackNone and the message unchanged.
// Other TChannel implementations never add the hint, so their messages read
// as PushbackNone. It does not allocate.
func PushbackFromMessage(msg string) (p Pushback, rest string) {
	i := strings.LastIndexByte(msg, ' ') + 1 // start of the last word
	word := msg[i:]
	if !strings.HasPrefix(word, pushbackHint) {
		return Pushback{}, msg
	}
	p = ParsePushback(word[len(pushbackHint):])
	if i > 0 {
		i-- // drop the separating space too
	}
	return p, msg[:i]
}
