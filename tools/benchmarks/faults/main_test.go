package faults

import (
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// TestMain serves as a child server when the kill and freeze scenarios
// re-execute this test binary (ServeChildIfAsked), and otherwise runs the
// tests with goleak watching for goroutines left behind, toxiproxy's own
// excepted (see goroutines). toxiproxy's bandwidth toxic logs through
// zerolog's global logger, which zerolog starts at trace level: the tests
// keep it to info and above.
func TestMain(m *testing.M) {
	ServeChildIfAsked()
	zerolog.SetGlobalLevel(zerolog.InfoLevel)
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"))
}
