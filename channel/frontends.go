package channel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/uber/tchannel-go"
)

// CallRaw calls a method of the Client's service with raw arguments and returns the
// response. A response marked as an application error is returned with a nil
// error and AppError set.
func (cl *Client) CallRaw(ctx context.Context, method string, arg2, arg3 []byte, opts ...CallOption) (*RawResponse, error) {
	c := cl.ch
	o := applyOptions(opts)
	// The call runs in a recycled state that holds its request too: the
	// RawResponse is all it allocates.
	st := c.frontState()
	st.frontReq = Request{Format: tchannel.Raw, Arg2: arg2, Arg3: arg3}
	res, err := c.invoke(ctx, st, cl, method, &st.frontReq, o)
	if err != nil {
		c.frontDone(st, o, err)
		return nil, err
	}
	raw := &RawResponse{Arg2: res.Arg2, Arg3: res.Arg3, AppError: res.AppError}
	c.frontDone(st, o, nil)
	return raw, nil
}

// frontState returns a zero callState for a front-end that keeps nothing
// of it once the call has returned (CallRaw, CallJSON): one that such a
// call has released (frontDone), or a new one.
func (c *Channel) frontState() *callState {
	if st, ok := c.states.Get().(*callState); ok {
		return st
	}
	return new(callState)
}

// frontDone releases the state st of a front-end call that has returned
// err, with options o, once the front-end is done with its response. It
// is recycled only when nothing outside the call can still reach it: not
// when a middleware saw it (one may keep the request, or an attempt's
// context), nor when the call's error or CallInfo lists its peers (their
// Peers slice is the state's). Such a state is left to the collector,
// without the caller's buffers if no middleware saw them.
func (c *Channel) frontDone(st *callState, o *callOptions, err error) {
	switch {
	case c.invoker != nil || c.sendAttempt != nil:
	case err != nil || (o != nil && o.info != nil):
		st.frontReq = Request{}
	default:
		scratch := st.scratch
		*st = callState{scratch: scratch} // keeps no peer, Channel or buffer alive
		c.states.Put(st)
	}
}

// CallJSON calls a method of the Client's service with req encoded as JSON and decodes the
// response into resp. An application error the handler returned comes back
// as *ApplicationError; a failed call as *CallError.
//
// The request's headers are those ctx carries through tchannel-go
// (json.WithHeaders, a ContextBuilder's SetHeaders and AddHeader, a JSON
// handler's own context: the headers it was called with, as tchannel-go's
// json.Client sends them), with WithHeaders' on top, replacing any of the
// same name. previous-rpc-attempts (retry.AttemptsHeader) is never taken
// from ctx: the pipeline sets it on each retry. As with tchannel-go's
// json.Client, ctx's response headers are not set: ResponseHeaders
// stores them.
func (cl *Client) CallJSON(ctx context.Context, method string, req, resp any, opts ...CallOption) error {
	c, service := cl.ch, cl.service
	o := applyOptions(opts)
	arg3, err := json.Marshal(req)
	if err != nil {
		err = fmt.Errorf("cannot encode the request as JSON: %w", err)
		err = &CallError{Service: service, Method: method, Code: codes.BadRequest, Message: err.Error(), Err: err}
		o.report(nil, err)
		return err
	}
	headers := o.jsonHeaders(ctx)
	st := c.frontState() // recycled, and holds the request (see CallRaw)
	st.frontReq = Request{Format: tchannel.JSON, Headers: headers, Arg3: arg3}
	res, err := c.invoke(ctx, st, cl, method, &st.frontReq, o)
	if err != nil {
		c.frontDone(st, o, err)
		return err
	}
	err = decodeJSONResponse(service, method, res, resp)
	c.frontDone(st, o, nil) // res may be in st: used up above
	return err
}

// decodeJSONResponse decodes a JSON call's response res into resp, or
// returns the application error it carries.
func decodeJSONResponse(service, method string, res *Response, resp any) error {
	if res.AppError {
		ae := &ApplicationError{}
		if err := json.Unmarshal(res.Arg3, ae); err != nil {
			return fmt.Errorf("sluice: call %s::%s: application error response is not JSON: %w", service, method, err)
		}
		return ae
	}
	if resp != nil {
		if err := json.Unmarshal(res.Arg3, resp); err != nil {
			return fmt.Errorf("sluice: call %s::%s: cannot decode the JSON response: %w", service, method, err)
		}
	}
	return nil
}

// jsonHeaders returns the headers of a JSON call made with ctx and options
// o (see CallJSON): ctx's tchannel-go headers but the attempt count, and
// o's over them. It copies only to merge or to drop the attempt count.
func (o *callOptions) jsonHeaders(ctx context.Context) map[string]string {
	var own map[string]string
	if o != nil {
		own = o.headers
	}
	in := tchCtx().headers(ctx)
	_, attempts := in[retry.AttemptsHeader]
	if len(in) == 0 || (len(in) == 1 && attempts) {
		return own
	}
	if len(own) == 0 && !attempts {
		return in
	}
	h := make(map[string]string, len(in)+len(own))
	for k, v := range in {
		h[k] = v
	}
	delete(h, retry.AttemptsHeader)
	for k, v := range own {
		h[k] = v
	}
	return h
}
