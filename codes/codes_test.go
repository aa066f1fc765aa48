package codes

import (
	"strings"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	for _, c := range wire[1:] {
		got, err := Parse(c.String())
		if err != nil || got != c {
			t.Errorf("Parse(%q) = %v, %v", c.String(), got, err)
		}
	}
	if got, err := Parse(" busy "); err != nil || got != Busy {
		t.Errorf("Parse is case-insensitive: got %v, %v", got, err)
	}
	for _, bad := range []string{"", "OK", "BUSYY", "0x03"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	for _, c := range locals {
		if _, err := Parse(c.String()); err == nil || !strings.Contains(err.Error(), "local outcome") {
			t.Errorf("Parse(%q) = %v, want a local-outcome error", c.String(), err)
		}
		if c.Known() || !c.IsLocal() || NewSet(c) != 0 {
			t.Errorf("%v: Known %v, IsLocal %v, set %v", c, c.Known(), c.IsLocal(), NewSet(c))
		}
	}
	if Unavailable.String() != "UNAVAILABLE" || Busy.IsLocal() || OK.IsLocal() {
		t.Error("local codes are named and told apart")
	}
	if Code(0x42).Known() || Code(0x42).String() != "CODE(0x42)" {
		t.Errorf("unknown code: %v", Code(0x42))
	}
}

func TestSet(t *testing.T) {
	s := NewSet(Busy, Protocol)
	for _, c := range wire {
		if want := c == Busy || c == Protocol; s.Has(c) != want {
			t.Errorf("Has(%v) = %v", c, s.Has(c))
		}
	}
	if s.Has(Code(0x42)) {
		t.Error("an unknown code is never a member")
	}
	if got := s.Codes(); len(got) != 2 || got[0] != Busy || got[1] != Protocol {
		t.Errorf("Codes() = %v", got)
	}
}

func TestErrorsIsEveryCodeButOK(t *testing.T) {
	for _, c := range wire {
		if got := Errors.Has(c); got != (c != OK) {
			t.Errorf("Errors.Has(%v) = %v", c, got)
		}
	}
}
