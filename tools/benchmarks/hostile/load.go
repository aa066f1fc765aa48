package hostile

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Load is what a legitimate client saw: calls made at a steady rate, each
// with a deadline, through a channel.Channel of its own.
type Load struct {
	Calls int `json:"calls"`
	OK    int `json:"ok"`
	// Errors counts failed calls by code (channel.CallError's CodeName,
	// TIMEOUT for a deadline passed, LOCAL for anything else).
	Errors map[string]int `json:"errors,omitzero"`
	// Latency quantiles of the calls that succeeded.
	P50        millis.Duration `json:"p50_ms"`
	P99        millis.Duration `json:"p99_ms"`
	Max        millis.Duration `json:"max_ms"`
	FirstError string          `json:"first_error,omitzero"`
}

func (l *Load) String() string {
	if l == nil {
		return "-"
	}
	s := fmt.Sprintf("%d/%d ok", l.OK, l.Calls)
	if l.OK > 0 {
		s += fmt.Sprintf(", p50 %s p99 %s max %s", ms(l.P50.D()), ms(l.P99.D()), ms(l.Max.D()))
	}
	if len(l.Errors) > 0 {
		s += ", errors " + countList(l.Errors)
	}
	return s
}

// runLoad makes rate echo calls a second of payload bytes, each with
// callDeadline, to addr through a new channel until stop is closed or ctx
// ends, and returns once every call has returned.
func runLoad(ctx context.Context, addr string, rate float64, payload int, stop <-chan struct{}) (*Load, error) {
	ch, cl, err := newClient(addr)
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	arg3 := bytes.Repeat([]byte("x"), payload)
	interval := time.Duration(float64(time.Second) / rate)
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		lat []time.Duration
	)
	l := &Load{Errors: map[string]int{}}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for start, i := time.Now(), 0; ; i++ {
		timer.Reset(max(0, time.Until(start.Add(time.Duration(i)*interval))))
		select {
		case <-timer.C:
		case <-stop:
		case <-ctx.Done():
		}
		if ctx.Err() != nil || isClosed(stop) {
			break
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, callDeadline)
			defer cancel()
			t0 := time.Now()
			_, err := cl.CallRaw(cctx, MethodEcho, nil, arg3)
			mu.Lock()
			defer mu.Unlock()
			l.Calls++
			if err == nil {
				l.OK++
				lat = append(lat, time.Since(t0))
				return
			}
			l.Errors[load.CodeOf(err)]++
			l.FirstError = cmp.Or(l.FirstError, err.Error())
		})
	}
	wg.Wait() // every call has its deadline
	l.P50, l.P99, l.Max = millis.Duration(quantile(lat, 0.5)), millis.Duration(quantile(lat, 0.99)), millis.Duration(quantile(lat, 1))
	if len(l.Errors) == 0 {
		l.Errors = nil
	}
	return l, nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func newClient(addr string) (*channel.Channel, *channel.Client, error) {
	ch, err := channel.New("hostile-client")
	if err != nil {
		return nil, nil, err
	}
	cl, err := ch.NewClient(Service)
	if err == nil {
		err = cl.AddPeer(addr)
	}
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	return ch, cl, nil
}

// Call is one legitimate call's outcome.
type Call struct {
	OK      bool            `json:"ok"`
	Code    string          `json:"code,omitzero"` // the failure's code
	Latency millis.Duration `json:"latency_ms"`
	Err     string          `json:"err,omitzero"`
}

func (c Call) String() string {
	switch {
	case c.OK:
		return "ok in " + ms(c.Latency.D())
	case c.Code == "":
		return "not made"
	}
	return fmt.Sprintf("%s after %s (%s)", c.Code, ms(c.Latency.D()), c.Err)
}

func oneCall(ctx context.Context, addr string, arg3 []byte, deadline time.Duration) Call {
	ch, cl, err := newClient(addr)
	if err != nil {
		return Call{Code: "LOCAL", Err: err.Error()}
	}
	defer ch.Close()
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t0 := time.Now()
	res, err := cl.CallRaw(cctx, MethodEcho, nil, arg3)
	c := Call{Latency: millis.Duration(time.Since(t0))}
	switch {
	case err != nil:
		c.Code, c.Err = load.CodeOf(err), err.Error()
	case !bytes.Equal(res.Arg3, arg3):
		c.Code, c.Err = "WRONG", fmt.Sprintf("echo answered %d bytes, not the %d sent", len(res.Arg3), len(arg3))
	default:
		c.OK = true
	}
	return c
}

// quantile returns the q-quantile (nearest rank) of d, sorting it; 0 if
// empty.
func quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return load.Quantile(d, q)
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fms", float64(d)/1e6)
}

// countList formats counts, most first: "TIMEOUT 12, NETWORK 3".
func countList[N int | int64](m map[string]N) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
