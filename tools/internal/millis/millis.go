// Package millis has the duration type of the commands' JSON reports.
package millis

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Duration is a time.Duration written in JSON as milliseconds (2.5).
type Duration time.Duration

// MarshalJSON writes d as a number of milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

// UnmarshalJSON reads a number of milliseconds; null leaves d as it is.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("millis: %s is not a number of milliseconds", b)
	}
	*d = Duration(math.Round(ms * float64(time.Millisecond)))
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d as a time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }
