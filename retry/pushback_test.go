package retry

import (
	"testing"
	"time"
)

const ms = time.Millisecond

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
