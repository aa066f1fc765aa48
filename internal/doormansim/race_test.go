//go:build race

package doormansim

// raceDetector is true in a -race build, which runs the simulation about
// ten times slower.
const raceDetector = true
