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
