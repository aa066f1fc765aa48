package testctx

import (
	"testing"
	"time"
)

func TestLatePasses(t *testing.T) {
	var c Late
	if _, ok := c.Deadline(); ok {
		t.Fatal("a deadline before Pass")
	}
	c.Pass()
	dl, ok := c.Deadline()
	if !ok || !dl.Before(time.Now()) {
		t.Fatalf("Deadline after Pass = %v, %v; want one that has passed", dl, ok)
	}
	if c.Err() != nil || c.Done() != nil {
		t.Fatal("Err or Done set: the timer must not have fired")
	}
}
