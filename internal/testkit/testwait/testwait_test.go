package testwait

import "testing"

func TestRecvReturnsTheValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, "a value"); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
	done := make(chan struct{})
	close(done)
	Recv(t, done, "a closed channel")
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}
