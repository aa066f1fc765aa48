package deploy

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// payload is every call's request body.
var payload = []byte("rolling-deploy")

// caller makes one call and returns the code it counts under and its
// error ("" and nil when it succeeded).
type caller func(ctx context.Context) (string, error)

// sluiceCaller calls Method through cl, a Client of Service.
func sluiceCaller(cl *channel.Client) caller {
	return func(ctx context.Context) (string, error) {
		_, err := cl.CallRaw(ctx, Method, nil, payload)
		return sluiceCode(err), err
	}
}

// sluiceCode names a Sluice call's outcome as the other benchmarks do
// (load.CodeOf), "" for a success.
func sluiceCode(err error) string {
	if err == nil {
		return ""
	}
	return load.CodeOf(err)
}

// tchannelCaller calls Service's Method through a plain tchannel-go
// channel, on a peer its peer list chooses.
func tchannelCaller(ch *tchannel.Channel) caller {
	sc := ch.GetSubChannel(Service)
	return func(ctx context.Context) (string, error) {
		_, _, _, err := raw.CallSC(ctx, sc, Method, nil, payload)
		return tchannelCode(err), err
	}
}

// tchannelCode names a plain tchannel-go call's outcome: the TChannel code
// of a system error; TIMEOUT for a deadline; NETWORK for a network error
// tchannel-go returns as it is (a refused connection); UNEXPECTED
// otherwise (tchannel-go's own reading, GetSystemErrorCode).
func tchannelCode(err error) string {
	var se tchannel.SystemError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return codes.Code(se.Code()).String()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.Timeout.String()
	case errors.As(err, &ne):
		return codes.Network.String()
	}
	return codes.Code(tchannel.GetSystemErrorCode(err)).String()
}

// call is one call's record.
type call struct {
	// at is its arrival: when the generator sent it on its way.
	at      time.Time
	latency time.Duration
	code    string // "" when it succeeded
	err     error
}

// loadGen is an open-loop load: call i arrives i/rate after the first and
// goes to callers[i mod len(callers)], each in a goroutine of its own with
// its own deadline.
type loadGen struct {
	stop chan struct{}
	done chan []call
}

// startLoad starts the load; finish stops it.
func startLoad(rate float64, timeout time.Duration, callers []caller) *loadGen {
	g := &loadGen{stop: make(chan struct{}), done: make(chan []call, 1)}
	go g.run(rate, timeout, callers)
	return g
}

func (g *loadGen) run(rate float64, timeout time.Duration, callers []caller) {
	var (
		mu    sync.Mutex
		calls []call
		wg    sync.WaitGroup
	)
	interval := time.Duration(float64(time.Second) / rate)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	start := time.Now()
arrivals:
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-g.stop:
				break arrivals
			}
			// The timer's oversleep is the generator's, not the call's.
			at = time.Now()
		} else {
			select {
			case <-g.stop:
				break arrivals
			default:
			}
		}
		wg.Add(1)
		go func(c caller, at time.Time) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			code, err := c(ctx)
			cancel()
			r := call{at: at, latency: time.Since(at), code: code, err: err}
			mu.Lock()
			calls = append(calls, r)
			mu.Unlock()
		}(callers[i%len(callers)], at)
	}
	wg.Wait() // each call ends by its deadline
	g.done <- calls
}

// finish stops the arrivals and returns every call once the last has
// returned.
func (g *loadGen) finish() []call {
	close(g.stop)
	return <-g.done
}
