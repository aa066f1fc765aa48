package retry

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParsePushback(t *testing.T) {
	stop := PushbackStopped()
	tests := []struct {
		in   string
		want Pushback
	}{
		{"0", PushbackAfter(0)},
		{"150", PushbackAfter(150 * ms)},
		{" 150\t", PushbackAfter(150 * ms)},
		{"+7", PushbackAfter(7 * ms)},
		{"007", PushbackAfter(7 * ms)},
		{"-0", PushbackAfter(0)},
		{"2147483647", PushbackAfter(math.MaxInt32 * ms)},
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

func TestFormatPushback(t *testing.T) {
	tests := []struct {
		p    Pushback
		want string
	}{
		{Pushback{}, ""},
		{PushbackStopped(), "-1"},
		{PushbackAfter(-time.Second), "-1"},
		{PushbackAfter(0), "0"},
		{PushbackAfter(250 * ms), "250"},
		{PushbackAfter(1500 * time.Microsecond), "2"}, // rounded up: never sooner than asked
		{PushbackAfter(1000 * time.Hour), "2147483647"},
	}
	for _, tt := range tests {
		if got := FormatPushback(tt.p); got != tt.want {
			t.Errorf("FormatPushback(%v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestPushbackFromMessage(t *testing.T) {
	tests := []struct {
		msg      string
		want     Pushback
		wantRest string
	}{
		{"server busy", Pushback{}, "server busy"},
		{"", Pushback{}, ""},
		{"server busy retry-pushback-ms=250", PushbackAfter(250 * ms), "server busy"},
		{"retry-pushback-ms=250", PushbackAfter(250 * ms), ""},
		{"overloaded retry-pushback-ms=-1", PushbackStopped(), "overloaded"},
		{"overloaded retry-pushback-ms=", PushbackStopped(), "overloaded"},
		{"overloaded retry-pushback-ms=soon", PushbackStopped(), "overloaded"},
		{"a  retry-pushback-ms=5", PushbackAfter(5 * ms), "a "},
		{"a retry-pushback-ms=5 retry-pushback-ms=7", PushbackAfter(7 * ms), "a retry-pushback-ms=5"},
		// Not at the end: not a hint.
		{"retry-pushback-ms=5 then more", Pushback{}, "retry-pushback-ms=5 then more"},
		{"a retry-pushback-ms=5 ", Pushback{}, "a retry-pushback-ms=5 "},
		{"xretry-pushback-ms=5", Pushback{}, "xretry-pushback-ms=5"},
		{"a x-retry-pushback-ms=5", Pushback{}, "a x-retry-pushback-ms=5"},
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
		p    Pushback
		want string
	}{
		{"busy", Pushback{}, "busy"},
		{"busy", PushbackAfter(100 * ms), "busy retry-pushback-ms=100"},
		{"busy", PushbackStopped(), "busy retry-pushback-ms=-1"},
		{"", PushbackAfter(3 * ms), "retry-pushback-ms=3"},
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

func TestPushbackString(t *testing.T) {
	for p, want := range map[Pushback]string{
		{}:                    "none",
		PushbackStopped():     "stop",
		PushbackAfter(2 * ms): "delay 2ms",
		{Kind: 9}:             "Pushback(9)",
	} {
		if got := p.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", p, got, want)
		}
	}
}

// FuzzParsePushback: never panics; a delay is a whole number of
// milliseconds in the int32 range and survives FormatPushback.
func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "150", "-1", "", "2147483647", "2147483648", " 5 ", "+3", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := ParsePushback(s)
		switch p.Kind {
		case PushbackStop:
		case PushbackDelay:
			if p.Delay < 0 || p.Delay > math.MaxInt32*ms || p.Delay%ms != 0 {
				t.Fatalf("ParsePushback(%q) = %v: not a whole int32 of ms", s, p)
			}
			if q := ParsePushback(FormatPushback(p)); q != p {
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
		if p.Kind == PushbackNone && rest != msg {
			t.Fatalf("no hint in %q but rest %q", msg, rest)
		}
		want := PushbackAfter(time.Duration(n) * ms)
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
	msg := AppendPushback("server is busy, try another peer", PushbackAfter(250*ms))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = PushbackFromMessage(msg)
	}
}
