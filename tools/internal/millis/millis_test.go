package millis

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMarshal(t *testing.T) {
	type report struct {
		Service Duration   `json:"service_ms"`
		Zero    Duration   `json:"zero_ms"`
		Long    Duration   `json:"long_ms"`
		Set     *Duration  `json:"set_ms"`
		Unset   *Duration  `json:"unset_ms"`
		Steps   []Duration `json:"steps_ms"`
	}
	set := Duration(time.Nanosecond)
	b, err := json.Marshal(report{Service: Duration(2500 * time.Microsecond), Long: Duration(90 * time.Minute), Set: &set,
		Steps: []Duration{Duration(time.Millisecond), Duration(1234567)}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"service_ms":2.5,"zero_ms":0,"long_ms":5400000,"set_ms":0.000001,"unset_ms":null,"steps_ms":[1,1.234567]}`
	if string(b) != want {
		t.Errorf("json.Marshal:\n got %s\nwant %s", b, want)
	}
}

// What MarshalJSON writes reads back the same: the hostile harness's
// child processes report their loads in this form.
func TestRoundTrip(t *testing.T) {
	for _, d := range []Duration{0, 1, Duration(1234567), Duration(-time.Second), Duration(90 * time.Minute), Duration(24*time.Hour + 1)} {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("%v: %s reads back as %v, %v", time.Duration(d), b, time.Duration(back), err)
		}
	}
	kept := Duration(time.Second)
	if err := json.Unmarshal([]byte("null"), &kept); err != nil || kept != Duration(time.Second) {
		t.Errorf("null: %v, %v; want it left as 1s", kept, err)
	}
	if err := json.Unmarshal([]byte(`"1s"`), &kept); err == nil || !strings.Contains(err.Error(), "not a number of milliseconds") {
		t.Errorf(`"1s": %v, want an error saying it is not a number of milliseconds`, err)
	}
}
