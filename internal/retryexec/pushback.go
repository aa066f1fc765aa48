package retryexec

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/retry"
)

// pushbackHint is how a Sluice server appends a pushback to the message of
// a TChannel error frame: " retry-pushback-ms=N" at the very end.
const pushbackHint = retry.PushbackHeader + "="

// ParsePushback reads a retry-pushback-ms header value: an ASCII signed
// 32-bit decimal integer, optionally surrounded by spaces or tabs. A value
// N >= 0 asks to retry after exactly N milliseconds; a negative or
// unparsable value (including the empty string) asks not to retry, as the
// gRPC design says. It never returns retry.PushbackNone: call it only when
// the header is present. It does not allocate for a well-formed value.
func ParsePushback(v string) retry.Pushback {
	n, ok := parseInt32(strings.Trim(v, " \t"))
	if !ok || n < 0 {
		return retry.Pushback{Kind: retry.PushbackStop}
	}
	return retry.Pushback{Kind: retry.PushbackDelay, Delay: time.Duration(n) * time.Millisecond}
}

// parseInt32 parses [-+]?[0-9]+ within the int32 range (strconv with base
// 10 accepts exactly that).
func parseInt32(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return n, err == nil
}

// AppendPushback returns msg with the pushback hint a Sluice server puts at
// the end of a TChannel error message: msg + " retry-pushback-ms=N" (no
// leading space when msg is empty). retry.PushbackNone returns msg
// unchanged. PushbackFromMessage reverses it.
func AppendPushback(msg string, p retry.Pushback) string {
	v := retry.FormatPushback(p)
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
// ParsePushback reads a header (unparsable means retry.PushbackStop). It
// returns the pushback and the message without the hint and the space
// before it; a message with no hint gives retry.PushbackNone and the
// message unchanged. Other TChannel implementations never add the hint, so
// their messages read as retry.PushbackNone. It does not allocate.
func PushbackFromMessage(msg string) (p retry.Pushback, rest string) {
	i := strings.LastIndexByte(msg, ' ') + 1 // start of the last word
	word := msg[i:]
	if !strings.HasPrefix(word, pushbackHint) {
		return retry.Pushback{}, msg
	}
	p = ParsePushback(word[len(pushbackHint):])
	if i > 0 {
		i-- // drop the separating space too
	}
	return p, msg[:i]
}
