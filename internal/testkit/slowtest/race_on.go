//go:build race

package slowtest

// Race is true in a binary built with -race, which runs most code several
// times slower: tests scale their sizes or slack by it.
const Race = true
