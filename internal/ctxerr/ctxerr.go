// Package ctxerr tells whether a context has ended, as a transport that
// checks deadlines itself sees it.
package ctxerr

import (
	"context"
	"time"
)

// Of returns ctx.Err(), or context.DeadlineExceeded once ctx's
// deadline has passed even if ctx's own timer has not fired yet. Context
// deadlines are wall-clock times whatever Clock a caller uses, so it reads
// the wall clock; it does so only for a ctx with a deadline that has not
// ended. Code that must tell "the context ended" from other failures as
// the deadline arrives uses it: transports check the deadline themselves
// and may fail a call before ctx.Done is closed.
func Of(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
