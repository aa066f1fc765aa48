package retryexec

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/retry"
)

func TestParsePushback(t *testing.T) {
	stop := retry.PushbackStopped()
	tests := []struct {
		in   string
		want retry.Pushback
	}{
		{"0", retry.PushbackAfter(0)},
		{"150", retry.PushbackAfter(150 * ms)},
		{" 150\t", retry.PushbackAfter(150 * ms)},
		{"+7", retry.PushbackAfter(7 * ms)},
		{"007", retry.PushbackAfter(7 * ms)},
		{"-0", retry.PushbackAfter(0)},
		{"2147483647", retry.PushbackAfter(math.MaxInt32 * ms)},
		{"-1", stop},
		{"-2147483648", stop},
		{"2147483648", stop}, // beyond int32: unparsable
		{"-2147483649", stop},
		{"99999999999999999999999", stop},
		{"", stop},
		{"-", stop},
		{"1.5", stop},
		{"1e3", stop},
		{"0x10", stop},
		{"10ms", stop},
		{"1 0", stop},
		{"١٢", stop}, // non-ASCII digits
	}
	for _, tt := range tests {
		if got := ParsePushback(tt.in); got != tt.want {
			t.Errorf("ParsePushback(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPushbackFromMessage(t *testing.T) {
	tests := []struct {
		msg      string
		want     retry.Pushback
		wantRest string
	}{
		{"server busy", retry.Pushback{}, "server busy"},
		{"", retry.Pushback{}, ""},
		{"server busy retry-pushback-ms=250", retry.PushbackAfter(250 * ms), "server busy"},
		{"retry-pushback-ms=250", retry.PushbackAfter(250 * ms), ""},
		{"overloaded retry-pushback-ms=-1", retry.PushbackStopped(), "overloaded"},
		{"overloaded retry-pushback-ms=", retry.PushbackStopped(), "overloaded"},
		{"overloaded retry-pushback-ms=soon", retry.PushbackStopped(), "overloaded"},
		{"a  retry-pushback-ms=5", retry.PushbackAfter(5 * ms), "a "},
		{"a retry-pushback-ms=5 retry-pushback-ms=7", retry.PushbackAfter(7 * ms), "a retry-pushback-ms=5"},
		// Not at the end: not a hint.
		{"retry-pushback-ms=5 then more", retry.Pushback{}, "retry-pushback-ms=5 then more"},
		{"a retry-pushback-ms=5 ", retry.Pushback{}, "a retry-pushback-ms=5 "},
		{"xretry-pushback-ms=5", retry.Pushback{}, "xretry-pushback-ms=5"},
		{"a x-retry-pushback-ms=5", retry.Pushback{}, "a x-retry-pushback-ms=5"},
	}
	for _, tt := range tests {
		p, rest := PushbackFromMessage(tt.msg)
		if p != tt.want || rest != tt.wantRest {
			t.Errorf("PushbackFromMessage(%q) = %v, %q; want %v, %q", tt.msg, p, rest, tt.want, tt.wantRest)
		}
	}
}

func TestAppendPushback(t *testing.T) {
	tests := []struct {
		msg  string
		p    retry.Pushback
		want string
	}{
		{"busy", retry.Pushback{}, "busy"},
		{"busy", retry.PushbackAfter(100 * ms), "busy retry-pushback-ms=100"},
		{"busy", retry.PushbackStopped(), "busy retry-pushback-ms=-1"},
		{"", retry.PushbackAfter(3 * ms), "retry-pushback-ms=3"},
	}
	for _, tt := range tests {
		got := AppendPushback(tt.msg, tt.p)
		if got != tt.want {
			t.Errorf("AppendPushback(%q, %v) = %q, want %q", tt.msg, tt.p, got, tt.want)
		}
		p, rest := PushbackFromMessage(got)
		if p != tt.p || rest != tt.msg {
			t.Errorf("round trip of %q: %v, %q", got, p, rest)
		}
	}
}

// FuzzParsePushback: never panics; a delay is a whole number of
// milliseconds in the int32 range and survives retry.FormatPushback.
func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "150", "-1", "", "2147483647", "2147483648", " 5 ", "+3", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := ParsePushback(s)
		switch p.Kind {
		case retry.PushbackStop:
		case retry.PushbackDelay:
			if p.Delay < 0 || p.Delay > math.MaxInt32*ms || p.Delay%ms != 0 {
				t.Fatalf("ParsePushback(%q) = %v: not a whole int32 of ms", s, p)
			}
			if q := ParsePushback(retry.FormatPushback(p)); q != p {
				t.Fatalf("round trip of %q: %v became %v", s, p, q)
			}
		default:
			t.Fatalf("ParsePushback(%q) = %v", s, p)
		}
	})
}

// FuzzPushbackFromMessage: never panics; the rest is a prefix of the
// message; appending a hint to any message is read back exactly.
func FuzzPushbackFromMessage(f *testing.F) {
	for _, s := range []string{"server busy", "busy retry-pushback-ms=250", "retry-pushback-ms=-1",
		"x retry-pushback-ms=", "a retry-pushback-ms=5 ", ""} {
		f.Add(s, int32(100))
	}
	f.Fuzz(func(t *testing.T, msg string, n int32) {
		p, rest := PushbackFromMessage(msg)
		if !strings.HasPrefix(msg, rest) {
			t.Fatalf("rest %q is not a prefix of %q", rest, msg)
		}
		if p.Kind == retry.PushbackNone && rest != msg {
			t.Fatalf("no hint in %q but rest %q", msg, rest)
		}
		want := retry.PushbackAfter(time.Duration(n) * ms)
		got, rest2 := PushbackFromMessage(AppendPushback(msg, want))
		if got != want || rest2 != msg {
			t.Fatalf("AppendPushback(%q, %v) read back as %v, %q", msg, want, got, rest2)
		}
	})
}

func BenchmarkParsePushback(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = ParsePushback("1500")
	}
}

func BenchmarkPushbackFromMessage(b *testing.B) {
	msg := AppendPushback("server is busy, try another peer", retry.PushbackAfter(250*ms))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = PushbackFromMessage(msg)
	}
}
