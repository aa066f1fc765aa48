package codes_test

import (
	"fmt"

	"github.com/sluice-rpc/sluice/codes"
)

func Example() {
	c, err := codes.Parse("busy")
	if err != nil {
		panic(err)
	}
	retryable := codes.NewSet(codes.Busy, codes.Declined)
	fmt.Println(c, uint8(c), retryable.Has(c), retryable.Has(codes.Timeout))
	// Output: BUSY 3 true false
}

// A Set is what a policy's retryableStatusCodes become: a bit set, cheap
// to test on every attempt.
func ExampleSet() {
	var names []codes.Code
	for _, s := range []string{"BUSY", "declined", "TIMEOUT"} {
		c, err := codes.Parse(s)
		if err != nil {
			panic(err)
		}
		names = append(names, c)
	}
	s := codes.NewSet(names...)
	fmt.Println(s.Codes(), s.Has(codes.Busy), s.Has(codes.Network))
	// Output: [TIMEOUT BUSY DECLINED] true false
}

// Local codes name outcomes decided in the calling process: nothing
// reached a server, so a policy cannot name them.
func ExampleCode_IsLocal() {
	for _, c := range []codes.Code{codes.Busy, codes.Throttled, codes.Unavailable} {
		fmt.Println(c, c.IsLocal())
	}
	_, err := codes.Parse("THROTTLED")
	fmt.Println(err != nil)
	// Output:
	// BUSY false
	// THROTTLED true
	// UNAVAILABLE true
	// true
}
