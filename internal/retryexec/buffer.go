package retryexec

import (
	"cmp"
	"sync/atomic"
)

// Default buffer limits. The gRPC design asks for both limits but publishes
// no numbers; these are grpc-java's defaults (retryBufferSize 16 MiB,
// perRpcBufferLimit 1 MiB).
const (
	// DefaultBufferSize is the default total of request bytes held for
	// possible retries across all calls of a channel.
	DefaultBufferSize = 16 << 20
	// DefaultPerCallBufferLimit is the default most bytes one call may hold.
	DefaultPerCallBufferLimit = 1 << 20
)

// Buffer accounts for the request bytes kept so that calls can be retried
// (gRPC's retry design, gRFC A6, "Memory Management (Buffering)"). A call
// reserves its request size before its first attempt; if the reservation
// fails, because the request is larger than the per-call limit or the
// total would be exceeded, the call is sent once and never retried. The
// reservation is released when the call returns to the application.
//
// A Buffer only counts bytes; it holds none. It is safe for concurrent use,
// lock-free and allocation-free. A nil *Buffer accepts every reservation.
type Buffer struct {
	used    atomic.Int64
	total   int64
	perCall int64
}

// BufferConfig configures a Buffer. Its zero value is grpc-java's limits:
// DefaultBufferSize in all, DefaultPerCallBufferLimit per call.
type BufferConfig struct {
	// Total is the most bytes held across all calls, >= 0; 0 means
	// DefaultBufferSize (16 MiB).
	Total int64
	// PerCall is the most bytes one call may hold, >= 0 and at most
	// Total; 0 means DefaultPerCallBufferLimit (1 MiB), or Total if that
	// is smaller.
	PerCall int64
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c BufferConfig) WithDefaults() BufferConfig {
	c.Total = cmp.Or(c.Total, DefaultBufferSize)
	c.PerCall = cmp.Or(c.PerCall, min(DefaultPerCallBufferLimit, c.Total))
	return c
}

// NewBuffer returns a Buffer with the limits of cfg, zero fields taking
// their defaults. cfg must keep BufferConfig's rules; a Channel's comes
// from channel.RetryConfig, whose Validate checks them.
func NewBuffer(cfg BufferConfig) *Buffer {
	cfg = cfg.WithDefaults()
	return &Buffer{total: cfg.Total, perCall: cfg.PerCall}
}

// Reservation is n bytes held in a Buffer. Its zero value holds nothing.
type Reservation struct {
	b *Buffer
	n int64
}

// Release returns the bytes to the Buffer. Call it exactly once per
// successful Reserve; releasing the zero Reservation does nothing.
func (r Reservation) Release() {
	if r.b != nil {
		r.b.used.Add(-r.n)
	}
}

// Reserve holds n bytes for a call and reports whether they fit. It fails,
// holding nothing, when n is negative, above the per-call limit, or would
// take the total above its limit.
func (b *Buffer) Reserve(n int64) (Reservation, bool) {
	if n < 0 {
		return Reservation{}, false
	}
	if b == nil {
		return Reservation{}, true
	}
	if n > b.perCall {
		return Reservation{}, false
	}
	for {
		used := b.used.Load()
		if used+n > b.total {
			return Reservation{}, false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return Reservation{b: b, n: n}, true
		}
	}
}

// Used returns the bytes reserved now. A nil Buffer reports 0.
func (b *Buffer) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}
