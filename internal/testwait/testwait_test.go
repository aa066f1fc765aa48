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
