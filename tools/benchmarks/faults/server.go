package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
)

// Service is what every fault-suite server serves and the client calls.
const Service = "faults"

// The methods every fault-suite server registers, raw and, their names
// ending in JSONSuffix, JSON.
const (
	// MethodEcho answers with the request's body.
	MethodEcho = "echo"
	// MethodBusy always answers BUSY (channel.Busy).
	MethodBusy = "busy"
	// MethodDeclined always answers DECLINED from the handler, which no
	// client may retry unless its policy names DECLINED.
	MethodDeclined = "declined"
	// JSONSuffix ends the name of a method's JSON variant.
	JSONSuffix = ".json"
)

// loopback is the only address the suite listens on or dials.
const loopback = "127.0.0.1"

// startServer starts a server of Service's methods on 127.0.0.1, on a
// listener that calls onAccept for each connection it accepts; each
// handler run calls onExec. With errs not nil, a handler answers
// UNEXPECTED when errs says it fails.
func startServer(onAccept, onExec func(), errs *erratic) (*channel.Channel, error) {
	ch, err := channel.New(Service)
	if err != nil {
		return nil, fmt.Errorf("faults: server: %w", err)
	}
	answer := func(method string) error {
		onExec()
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
		err = errors.Join(err, ch.RegisterRaw(m, func(_ context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			return &channel.RawResponse{Arg3: req.Arg3}, answer(m)
		}))
		jsonHandlers[m+JSONSuffix] = func(_ tjson.Context, req map[string]any) (map[string]any, error) {
			return req, answer(m)
		}
	}
	err = errors.Join(err, ch.RegisterJSON(jsonHandlers))
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", loopback+":0")
	}
	if err == nil {
		if err = ch.TChannel().Serve(countingListener{Listener: ln, onAccept: onAccept}); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("faults: server: %w", err)
	}
	return ch, nil
}

// countingListener reports every connection it accepts to onAccept.
type countingListener struct {
	net.Listener
	onAccept func()
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.onAccept()
	}
	return c, err
}
