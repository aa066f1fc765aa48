package balancing

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// HotKey is the shard scenario's hot key, outside the Zipf-drawn keys.
const HotKey = "hot"

// keyName returns the name of the key of rank r (-1: HotKey).
func keyName(r int) string {
	if r < 0 {
		return HotKey
	}
	return "k" + strconv.Itoa(r)
}

// keySequence draws n keys' ranks, seeded with seed: with probability hot
// -1, the hot key, else one of keys ranks by a Zipf distribution of
// exponent s (rank r with probability in proportion to (r + 1)^-s).
func keySequence(n, keys int, s, hot float64, seed uint64) ([]int32, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5ead))
	z := rand.NewZipf(rng, s, 1, uint64(keys-1))
	if z == nil {
		return nil, fmt.Errorf("balancing: no Zipf distribution of exponent %v over %d keys (the exponent must be > 1)", s, keys)
	}
	out := make([]int32, n)
	for i := range out {
		if hot > 0 && rng.Float64() < hot {
			out[i] = -1
		} else {
			out[i] = int32(z.Uint64())
		}
	}
	return out, nil
}
