// Package slowtest gates the tests too slow for the everyday suite: they
// run only with SLUICE_SLOW=1 in the environment, as .ci/run's slow step
// sets it. scripts/slowtests.sh runs every gated test; the README lists
// them.
package slowtest

import (
	"os"
	"testing"
)

// Env is the environment variable that turns the slow tests on: they run
// when it is "1".
const Env = "SLUICE_SLOW"

// Enabled reports whether slow tests run.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Skip skips t unless slow tests run; takes says what makes t slow, as
// "30 s of real time".
func Skip(t testing.TB, takes string) {
	t.Helper()
	if !Enabled() {
		t.Skipf("slow (%s): run with %s=1", takes, Env)
	}
}
