package etcdelection_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests with goleak watching for goroutines left
// behind, toxiproxy's own excepted (its links end on their own after a
// proxy stops).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"))
}
