package hostile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/childproc"
)

// debugClient reads profiles, within a timeout.
var debugClient = &http.Client{Timeout: 10 * time.Second}

// debugFigure returns the number after prefix at the start of a line of
// the profile at debugURL+path.
func debugFigure(ctx context.Context, debugURL, path, prefix string) (int64, error) {
	if debugURL == "" {
		return 0, fmt.Errorf("no debug endpoint")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, debugURL+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := debugClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no line %q", req.URL, prefix)
}

// readGoroutines returns a server's goroutine count, -1 if unknown.
func readGoroutines(ctx context.Context, debugURL string) int {
	n, err := debugFigure(ctx, debugURL, "/debug/pprof/goroutine?debug=1", "goroutine profile: total ")
	if err != nil {
		return -1
	}
	return int(n)
}

// readHeap returns a server's live heap (HeapAlloc) after two garbage
// collections: the second empties the sync.Pool caches the first keeps.
func readHeap(ctx context.Context, debugURL string) (int64, error) {
	const path, prefix = "/debug/pprof/heap?debug=1&gc=1", "# HeapAlloc = "
	if _, err := debugFigure(ctx, debugURL, path, prefix); err != nil {
		return 0, err
	}
	return debugFigure(ctx, debugURL, path, prefix)
}

// sampler records the peak of a process's memory, every rssEvery, and of
// a server's goroutines (a costlier profile) every gorEvery, if not 0. It
// samples the process and debug URL last given to follow.
type sampler struct {
	cancel    context.CancelFunc // stops the sampling, and a profile read in flight
	wg        sync.WaitGroup
	mu        sync.Mutex
	pid       int
	debugURL  string
	rssPeak   int64
	gorPeak   int
	rssSeries []int64 // every sample, for soak
}

func startSampler(ctx context.Context, pid int, debugURL string, rssEvery, gorEvery time.Duration) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, pid: pid, debugURL: debugURL, gorPeak: -1}
	rss := func() bool {
		pid, _ := s.target()
		if rss, _, err := childproc.Memory(pid); err == nil {
			s.mu.Lock()
			s.rssPeak = max(s.rssPeak, rss)
			s.rssSeries = append(s.rssSeries, rss)
			s.mu.Unlock()
		}
		return ctx.Err() == nil
	}
	gor := func() bool {
		_, debugURL := s.target()
		n := readGoroutines(ctx, debugURL)
		s.mu.Lock()
		s.gorPeak = max(s.gorPeak, n)
		s.mu.Unlock()
		return ctx.Err() == nil
	}
	rss()
	s.wg.Go(func() { every(rssEvery, ctx.Done(), rss) })
	if gorEvery > 0 {
		s.wg.Go(func() { every(gorEvery, ctx.Done(), gor) })
	}
	return s
}

// follow has the sampler sample pid and debugURL from now on: a restarted
// server, or none (0 and "") while a dead one's PID may be reused.
func (s *sampler) follow(pid int, debugURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid, s.debugURL = pid, debugURL
}

func (s *sampler) target() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid, s.debugURL
}

// finish stops the sampler and returns the peaks (0 and -1 if unknown).
// A goroutine profile still being read is abandoned, not waited for: a
// server too busy to answer would hold the attack up to debugClient's
// timeout.
func (s *sampler) finish() (rssPeak int64, gorPeak int) {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rssPeak, s.gorPeak
}
