package retry

import "testing"

func TestStopReasonString(t *testing.T) {
	for r := StopSucceeded; r <= StopDeadline; r++ {
		if s := r.String(); s == "" || s[0] == 'S' {
			t.Errorf("StopReason(%d).String() = %q", r, s)
		}
	}
	if StopReason(0).String() != "StopReason(0)" || StopExhausted.String() != "attempts exhausted" {
		t.Error("StopReason names")
	}
}
