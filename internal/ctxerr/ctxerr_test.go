package ctxerr

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testctx"
)

func TestOf(t *testing.T) {
	if err := Of(context.Background()); err != nil {
		t.Fatalf("Of(Background) = %v", err)
	}
	future, cancel := context.WithTimeout(context.Background(), time.Hour)
	if err := Of(future); err != nil {
		t.Fatalf("ContextErr before the deadline = %v", err)
	}
	cancel()
	if err := Of(future); err != context.Canceled {
		t.Fatalf("ContextErr of a cancelled context = %v, want Canceled", err)
	}
	late := &testctx.Late{}
	late.Pass()
	if err := Of(late); err != context.DeadlineExceeded {
		t.Fatalf("ContextErr past the deadline, before its timer = %v, want DeadlineExceeded", err)
	}
}
