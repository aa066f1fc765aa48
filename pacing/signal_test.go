package pacing

import (
	"testing"
	"time"
)

// A client paces itself by TimeLeft and Reset: written rounded down they
// would send it back up to a millisecond before the window ends.
func TestFormatQuotaRoundsTheWindowsEndUp(t *testing.T) {
	s := Signal{Fields: FieldTimeLeft | FieldReset | FieldWindow, Window: 1500 * time.Microsecond,
		TimeLeft: 1200 * time.Microsecond, Reset: time.UnixMilli(1637835220000).Add(500 * time.Microsecond)}
	if got, want := formatQuota(s), "Time:1,TimeLeft:2,Reset:1637835220001"; got != want {
		t.Fatalf("formatQuota = %q, want %q", got, want)
	}
	s = Signal{Fields: FieldTimeLeft | FieldReset, TimeLeft: 2 * time.Millisecond, Reset: time.UnixMilli(1637835220000)}
	if got, want := formatQuota(s), "TimeLeft:2,Reset:1637835220000"; got != want {
		t.Fatalf("whole milliseconds: formatQuota = %q, want %q", got, want)
	}
}
