package channel

import (
	"errors"
	"fmt"
	"time"

	"github.com/uber/tchannel-go"
)

// Request is one call's payload, as every attempt of the call sends it.
// Front-ends (CallRaw, CallJSON, package thrift) build one; Call sends it.
// Call neither modifies a Request nor keeps it, its Headers or its args
// after it returns (every attempt, hedges included, has ended by then), so
// callers may reuse their buffers.
type Request struct {
	// Format is the TChannel arg scheme: tchannel.Raw, tchannel.JSON or
	// tchannel.Thrift.
	Format tchannel.Format
	// Headers are the application headers of a JSON or Thrift call, encoded
	// into arg2 for each attempt (with tracing headers added).
	Headers map[string]string
	// Arg2 is a raw call's arg2, sent as is.
	Arg2 []byte
	// Arg3 is the encoded body.
	Arg3 []byte
}

// TChannel's limits on names, and Thrift's on headers: a call frame carries
// the service as string~1, tchannel-go refuses a method (arg1) over 16 KiB,
// and Thrift headers are nh~2 (k~2 v~2).
const (
	maxServiceName  = 255
	maxMethodName   = 16 << 10
	maxThriftHeader = 1<<16 - 1
)

// checkService returns why service cannot be a TChannel service name, or
// nil. NewClient checks it, once, so that a Client's calls need not.
func checkService(service string) error {
	switch {
	case service == "":
		return errors.New("the service name is empty")
	case len(service) > maxServiceName:
		return fmt.Errorf("the service name is %d bytes; TChannel allows at most %d", len(service), maxServiceName)
	}
	return nil
}

// checkMethod returns why method cannot be sent as a TChannel method
// name, or nil.
func checkMethod(method string) error {
	if len(method) > maxMethodName {
		return fmt.Errorf("the method name is %d bytes; TChannel allows at most %d", len(method), maxMethodName)
	}
	return nil
}

// checkRequest returns why req cannot be sent, or nil: what no attempt and
// no peer could change.
func (c *Channel) checkRequest(req *Request) error {
	if req == nil {
		return errors.New("the request is nil; pass a *Request with a Format and its arguments")
	}
	size := int64(len(req.Arg2) + len(req.Arg3))
	switch req.Format {
	case tchannel.Raw:
	case tchannel.JSON, tchannel.Thrift:
		if req.Format == tchannel.Thrift && len(req.Headers) > maxThriftHeader {
			return fmt.Errorf("the request has %d headers; Thrift allows at most %d", len(req.Headers), maxThriftHeader)
		}
		for k, v := range req.Headers {
			if req.Format == tchannel.Thrift && max(len(k), len(v)) > maxThriftHeader {
				return fmt.Errorf("header %.40q is %d bytes long with its value; Thrift allows at most %d for each", k, len(k)+len(v), maxThriftHeader)
			}
			size += int64(len(k) + len(v))
		}
	default:
		return fmt.Errorf("format %q is not supported; use raw, json or thrift", req.Format)
	}
	if size > c.o.maxRequest {
		return fmt.Errorf("the request's arguments are %d bytes, over the limit of %d (WithMaxRequestSize)", size, c.o.maxRequest)
	}
	return nil
}

// WithHeader returns a copy of r with one more application header (JSON
// and Thrift calls; a raw call has no headers, and sends Arg2 as is). r and
// its Headers are left as they are: they are the caller's, shared by the
// call's attempts.
func (r *Request) WithHeader(k, v string) *Request {
	c := *r
	c.Headers = make(map[string]string, len(r.Headers)+1)
	for hk, hv := range r.Headers {
		c.Headers[hk] = hv
	}
	c.Headers[k] = v
	return &c
}

// Response is what the successful attempt read.
type Response struct {
	// Headers are the decoded application headers of a JSON or Thrift
	// response.
	Headers map[string]string
	// Arg2 is the response's arg2 as received.
	Arg2 []byte
	// Arg3 is the encoded body.
	Arg3 []byte
	// AppError marks an application error: the handler answered, with an
	// error of its own. Never retried.
	AppError bool
	// Attempts is the number of attempts sent; Peer the host:port that
	// answered; Peers every peer an attempt went or tried to go to, in the
	// order they were chosen (a peer that could not be reached is listed
	// although nothing was sent to it).
	Attempts int
	Peer     string
	Peers    []string

	end time.Time // when the attempt that read it ended
	// held is the response budget its arguments took (WithResponseBudget),
	// until the attempt hands it to its call (callState.held).
	held int64
}
