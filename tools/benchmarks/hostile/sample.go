package hostile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// readRSS returns a process's resident memory (VmRSS) in bytes, from
// /proc (Linux).
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "VmRSS" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: VmRSS: %v", pid, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS (a zombie?)", pid)
}

// goroutineClient fetches profiles; its own timeout bounds a server too
// busy to answer.
var goroutineClient = &http.Client{Timeout: 10 * time.Second}

// readGoroutines returns a server's goroutine count from the first line of
// its goroutine profile ("goroutine profile: total N") at debugURL (its
// --debug-listen's http://host:port).
func readGoroutines(ctx context.Context, debugURL string) (int, error) {
	if debugURL == "" {
		return 0, errors.New("no debug endpoint")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, debugURL+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := goroutineClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("%s: %v", req.URL, err)
	}
	n, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("%s: first line %q is not \"goroutine profile: total N\"", req.URL, line)
	}
	return strconv.Atoi(n)
}

// readHeap returns a server's live heap (runtime.MemStats.HeapAlloc)
// right after two garbage collections, from its heap profile at debugURL
// (?gc=1 collects first; the second collection empties the sync.Pool
// caches the first one keeps). Unlike its resident memory, it drops as
// soon as what the server held is freed: the Go runtime returns freed
// memory to the system only minutes later.
func readHeap(ctx context.Context, debugURL string) (int64, error) {
	if _, err := readHeapOnce(ctx, debugURL); err != nil {
		return 0, err
	}
	return readHeapOnce(ctx, debugURL)
}

func readHeapOnce(ctx context.Context, debugURL string) (int64, error) {
	if debugURL == "" {
		return 0, errors.New("no debug endpoint")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, debugURL+"/debug/pprof/heap?debug=1&gc=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := goroutineClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no HeapAlloc line", req.URL)
}

// sampler records the peak of a server's memory and goroutines while an
// attack lasts: memory every rssEvery, goroutines every gorEvery (a
// goroutine profile of 20,000 goroutines costs the server a little).
type sampler struct {
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	rssPeak   int64
	gorPeak   int
	rssSeries []int64 // every sample, for soak
}

func startSampler(ctx context.Context, t *Target, rssEvery, gorEvery time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), gorPeak: -1}
	go func() {
		defer close(s.done)
		rt := time.NewTicker(rssEvery)
		defer rt.Stop()
		gt := time.NewTicker(gorEvery)
		defer gt.Stop()
		s.sampleRSS(t)
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-rt.C:
				s.sampleRSS(t)
			case <-gt.C:
				if n, err := readGoroutines(ctx, t.DebugURL); err == nil {
					s.mu.Lock()
					s.gorPeak = max(s.gorPeak, n)
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}

func (s *sampler) sampleRSS(t *Target) {
	if rss, err := readRSS(t.PID); err == nil {
		s.mu.Lock()
		s.rssPeak = max(s.rssPeak, rss)
		s.rssSeries = append(s.rssSeries, rss)
		s.mu.Unlock()
	}
}

// finish stops the sampler and returns the peaks (0 and -1 when nothing
// could be read) and every memory sample.
func (s *sampler) finish() (rssPeak int64, gorPeak int, series []int64) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rssPeak, s.gorPeak, s.rssSeries
}
