package balancing

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// HotKey is the shard scenario's hot key, outside the Zipf-drawn keys.
const HotKey = "hot"

// keyStream draws the shard scenario's keys: with probability hot the hot
// key, else one of n keys by a Zipf distribution of exponent s (the key of
// rank r, from 0, with probability in proportion to (r + 1)^-s), from a
// source seeded with seed.
type keyStream struct {
	rng  *rand.Rand
	zipf *rand.Zipf
	hot  float64
}

// newKeyStream returns the stream; s must be > 1 and n >= 2.
func newKeyStream(n int, s, hot float64, seed uint64) (*keyStream, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5ead))
	z := rand.NewZipf(rng, s, 1, uint64(n-1))
	if z == nil {
		return nil, fmt.Errorf("balancing: no Zipf distribution of exponent %v over %d keys (the exponent must be > 1)", s, n)
	}
	return &keyStream{rng: rng, zipf: z, hot: hot}, nil
}

// next returns the next key's rank, or -1 for the hot key.
func (k *keyStream) next() int {
	if k.hot > 0 && k.rng.Float64() < k.hot {
		return -1
	}
	return int(k.zipf.Uint64())
}

// keyName returns the name of the key of rank r (-1: HotKey).
func keyName(r int) string {
	if r < 0 {
		return HotKey
	}
	return "k" + strconv.Itoa(r)
}

// keySequence draws n keys' ranks from a fresh stream.
func keySequence(n, keys int, s, hot float64, seed uint64) ([]int32, error) {
	ks, err := newKeyStream(keys, s, hot, seed)
	if err != nil {
		return nil, err
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(ks.next())
	}
	return out, nil
}
