package benchrun

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		z    Size
		name string
		pick int
	}{{Full, "full", 1}, {CI, "ci", 2}} {
		js, err := json.Marshal(tc.z)
		if tc.z.String() != tc.name || err != nil || string(js) != `"`+tc.name+`"` || Pick(tc.z, 1, 2) != tc.pick {
			t.Errorf("%d: String %q, JSON %s (%v), Pick %d; want %q, the same quoted, %d", tc.z, tc.z, js, err, Pick(tc.z, 1, 2), tc.name, tc.pick)
		}
	}
}

func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)
	restore := SetGCPercent(DefaultGCPercent)
	if got := debug.SetGCPercent(DefaultGCPercent); got != DefaultGCPercent {
		t.Errorf("while set: GOGC %d, want %d", got, DefaultGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("restored: GOGC %d, want 150", got)
	}
	SetGCPercent(-1)()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("a negative percent: GOGC %d, want the process's 150 kept", got)
	}
	if GOGC(400) != "400" || GOGC(-1) != "the process's" || OnOff(true) != "on" || OnOff(false) != "off" {
		t.Errorf("GOGC(400), GOGC(-1), OnOff: %q %q %q %q", GOGC(400), GOGC(-1), OnOff(true), OnOff(false))
	}
}

func TestParseList(t *testing.T) {
	all := []string{"a", "b", "c"}
	if got, err := ParseList(" c, a,c ", all, "letter"); err != nil || strings.Join(got, ",") != "c,a" {
		t.Errorf("ParseList(c, a,c) = %v, %v; want c,a: the order given, each once", got, err)
	}
	if got, err := ParseList("all", all, "letter"); err != nil || strings.Join(got, ",") != "a,b,c" {
		t.Errorf("ParseList(all) = %v, %v; want a,b,c", got, err)
	}
	for _, bad := range []string{"d", "", "a,,b"} {
		if _, err := ParseList(bad, all, "letter"); err == nil || !strings.Contains(err.Error(), "unknown letter") ||
			!strings.Contains(err.Error(), "the letters are a, b, c (or all)") {
			t.Errorf("ParseList(%q): %v, want an error naming the letters", bad, err)
		}
	}
}
