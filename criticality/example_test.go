package criticality_test

import (
	"context"
	"fmt"

	"github.com/sluice-rpc/sluice/criticality"
)

// A handler's prefetch is sheddable, whatever the class of the request it
// serves; its other calls inherit that class.
func ExampleWithClass() {
	ctx := context.Background() // a handler's context, in a server
	prefetch := criticality.WithClass(ctx, criticality.Sheddable)
	fmt.Println(criticality.FromContext(ctx), criticality.FromContext(prefetch))
	// Output: critical sheddable
}

func ExampleParse() {
	c, err := criticality.Parse("sheddable_plus")
	fmt.Println(c, err, c < criticality.Critical)
	// Output: sheddable_plus <nil> true
}
