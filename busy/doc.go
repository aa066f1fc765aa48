// Package busy throttles requests to one peer after it answers "busy".
//
// It implements TChannel's "Throttling on Busy Responses" design: time is cut
// into windows (one second by default). In the current window a Limiter counts
// the requests it allowed and the busy responses it was told of, and it allows
// a request while
//
//	sent < floor(limit)
//
// At each window boundary the limit becomes, for the multiplicative strategy
// (the default, and the design's),
//
//	limit = min(Ceiling, limit * (1 + RecoverRate) / 2^min(busy, MaxHalvings))
//
// and for the constant strategy (kept for comparison, as in the design)
//
//	limit = min(Ceiling, (limit + RecoverValue) / 2^min(busy, MaxHalvings))
//
// A window with no traffic still recovers. With the defaults (Ceiling
// 9,999,999, RecoverRate 3, MaxHalvings 20) one busy window cuts the limit by
// 2^20/4 and each quiet window multiplies it by 4: exactly the function behind
// the design's published simulation tables, which Sluice's simulator
// (`sluice-lab sim busy`) reproduces by driving this very Limiter on a fake clock.
//
// A Limiter is safe for concurrent use. Allow and RecordBusy are lock-free and
// allocation-free; only the first call in a new window takes a mutex to roll
// the window over.
package busy
