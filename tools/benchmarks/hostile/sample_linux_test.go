package hostile

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestSamplerFollows checks that the sampler samples the process and
// debug URL last given to follow, as after a server's restart, and no
// longer the old ones.
func TestSamplerFollows(t *testing.T) {
	profile := func(n int, hits *atomic.Int64) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			fmt.Fprintf(w, "goroutine profile: total %d\n", n)
		}))
		t.Cleanup(s.Close)
		return s
	}
	var oldHits, newHits atomic.Int64
	old, cur := profile(5, &oldHits), profile(7, &newHits)
	t.Cleanup(debugClient.CloseIdleConnections)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the sampler never %s", what)
			}
		}
	}

	// PID 0 has no /proc entry: the old process is gone.
	s := startSampler(context.Background(), 0, old.URL, time.Millisecond, time.Millisecond)
	defer s.finish()
	waitFor("read the old debug URL", func() bool { return oldHits.Load() > 0 })
	s.follow(os.Getpid(), cur.URL)
	waitFor("read the new debug URL", func() bool { return newHits.Load() > 0 })
	before := oldHits.Load()
	waitFor("read the new debug URL again", func() bool { return newHits.Load() > 2 })
	rss, gor := s.finish()
	if n := oldHits.Load(); n != before {
		t.Errorf("the old debug URL was read %d times after the new one", n-before)
	}
	if gor != 7 {
		t.Errorf("goroutines peak %d, want the new server's 7", gor)
	}
	if rss <= 0 {
		t.Errorf("RSS peak %d: the new process's memory was not read", rss)
	}
}

// TestSamplerFinishDoesNotWait checks that finish returns at once while a
// goroutine profile is being read from a server that does not answer,
// rather than after debugClient's timeout.
func TestSamplerFinishDoesNotWait(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	t.Cleanup(debugClient.CloseIdleConnections)

	s := startSampler(context.Background(), 0, srv.URL, time.Hour, time.Millisecond)
	<-entered
	start := time.Now()
	_, gor := s.finish()
	if took := time.Since(start); took > debugClient.Timeout/2 {
		t.Errorf("finish took %v: it waited for the unanswered profile", took)
	}
	if gor != -1 {
		t.Errorf("goroutines peak %d, want -1 (never read)", gor)
	}
}
