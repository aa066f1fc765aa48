package leasing

import "errors"

// ErrRateLimited is returned by RateLimiter.Wait when the caller would have
// to wait past its context's deadline for capacity (or the capacity is 0
// and the context has a deadline). Test for it with errors.Is.
var ErrRateLimited = errors.New("leasing: rate limited: no capacity before the deadline")

// ErrClosed is returned by a Client (or its resources) after Close.
var ErrClosed = errors.New("leasing: client is closed")
