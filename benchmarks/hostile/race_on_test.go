//go:build race

package hostile

// raceEnabled reports whether the tests run with -race, which slows the
// measuring client several times.
const raceEnabled = true
