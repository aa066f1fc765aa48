package faults

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
)

// Service is the TChannel service every fault-suite server serves and the
// client calls.
const Service = "faults"

// The methods every fault-suite server registers, raw and JSON. The JSON
// ones carry JSONSuffix ("echo.json"): a method is registered once per name.
const (
	// MethodEcho answers with the request's body.
	MethodEcho = "echo"
	// MethodBusy always answers BUSY (channel.Busy).
	MethodBusy = "busy"
	// MethodDeclined always answers DECLINED (channel.Declined), from the
	// handler: a decline after a handler ran, which no client may retry
	// unless its policy names DECLINED.
	MethodDeclined = "declined"
	// JSONSuffix ends the name of the JSON variant of each method.
	JSONSuffix = ".json"
)

// registerHandlers registers the raw and JSON variants of the three methods
// on ch; each execution of any of them calls executed first. With errs
// not nil, any of them answers UNEXPECTED instead when errs says it fails.
func registerHandlers(ch *channel.Channel, executed func(), errs *erratic) error {
	answer := func(method string) error {
		executed()
		if errs != nil && errs.fail(time.Now()) {
			return tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "faults: this server fails half its calls")
		}
		switch method {
		case MethodBusy:
			return channel.Busy("faults: this server always answers busy")
		case MethodDeclined:
			return channel.Declined("faults: this handler always declines")
		}
		return nil
	}
	jsonHandlers := map[string]any{}
	for _, m := range []string{MethodEcho, MethodBusy, MethodDeclined} {
		if err := ch.RegisterRaw(m, func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			if err := answer(m); err != nil {
				return nil, err
			}
			return &channel.RawResponse{Arg3: req.Arg3}, nil
		}); err != nil {
			return fmt.Errorf("faults: register raw %s: %w", m, err)
		}
		jsonHandlers[m+JSONSuffix] = func(_ tjson.Context, req map[string]any) (map[string]any, error) {
			if err := answer(m); err != nil {
				return nil, err
			}
			return req, nil
		}
	}
	if err := ch.RegisterJSON(jsonHandlers); err != nil {
		return fmt.Errorf("faults: register JSON handlers: %w", err)
	}
	return nil
}

// server is a real Sluice server of Service on 127.0.0.1, serving on a
// counting listener: it records the TCP connections it accepts and its
// handler executions.
type server struct {
	ch *channel.Channel
}

// startServer starts a server recording into accepts and execs; errs, when
// not nil, makes it fail the calls errs picks with UNEXPECTED.
func startServer(accepts, execs *events, errs *erratic) (*server, error) {
	ch, err := channel.New(Service)
	if err != nil {
		return nil, fmt.Errorf("faults: server: %w", err)
	}
	if err := registerHandlers(ch, func() { execs.add(time.Now()) }, errs); err != nil {
		ch.Close()
		return nil, err
	}
	if err := serveCounting(ch, func() { accepts.add(time.Now()) }); err != nil {
		ch.Close()
		return nil, err
	}
	return &server{ch: ch}, nil
}

// serveCounting makes ch serve on a fresh listener on 127.0.0.1 that calls
// onAccept for each connection it accepts. It hands the listener to the
// underlying tchannel-go channel (channel.Channel listens only by address,
// and the accepts are to be counted where they happen).
func serveCounting(ch *channel.Channel, onAccept func()) error {
	ln, err := net.Listen("tcp", loopback+":0")
	if err != nil {
		return fmt.Errorf("faults: listen on %s:0: %w", loopback, err)
	}
	if err := ch.TChannel().Serve(countingListener{Listener: ln, onAccept: onAccept}); err != nil {
		ln.Close()
		return fmt.Errorf("faults: serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

// Addr returns the server's host:port.
func (s *server) Addr() string { return s.ch.HostPort() }

// Close stops the server; channel.Channel.Close bounds its wait.
func (s *server) Close() { s.ch.Close() }
