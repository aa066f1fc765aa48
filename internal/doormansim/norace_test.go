//go:build !race

package doormansim

const raceDetector = false
