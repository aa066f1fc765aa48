package channel

import "errors"

// CallOption configures one call.
type CallOption func(*callOptions)

type callOptions struct {
	headers      map[string]string
	respHeaders  *map[string]string
	info         *CallInfo
	waitForReady bool
}

// WithHeaders sends application headers with a JSON call (TChannel's arg2).
// CallJSON only: Call takes them in Request.Headers.
func WithHeaders(h map[string]string) CallOption {
	return func(o *callOptions) { o.headers = h }
}

// ResponseHeaders stores the JSON response's application headers in *dst.
// CallJSON only: Call returns them in Response.Headers.
func ResponseHeaders(dst *map[string]string) CallOption {
	return func(o *callOptions) { o.respHeaders = dst }
}

// WaitForReady makes the call wait, until its deadline, for a peer to
// become ready when every peer is in transient failure, instead of failing
// at once with UNAVAILABLE (gRPC's waitForReady). Without it a call waits
// only while some peer is connecting. The service config's waitForReady
// sets it for a method's every call.
func WaitForReady() CallOption {
	return func(o *callOptions) { o.waitForReady = true }
}

// CallInfo is how a call went: the attempts it sent and where they went.
type CallInfo struct {
	// Attempts is the number of attempts sent on the wire.
	Attempts int
	// Peer is the host:port that answered, or that the last attempt went
	// to ("" if none was chosen).
	Peer string
	// Peers is every peer an attempt went or tried to go to, in the order
	// they were chosen.
	Peers []string
}

// ReportCallInfo stores in *dst, when the call returns, successful or not,
// its attempts and peers: for CallJSON and CallRaw, whose results do not
// carry them (Call's Response and every *CallError do).
func ReportCallInfo(dst *CallInfo) CallOption {
	return func(o *callOptions) { o.info = dst }
}

// applyOptions returns the options opts set, or nil without any: applying
// them makes the options escape, an allocation the common call need not
// pay.
func applyOptions(opts []CallOption) *callOptions {
	if len(opts) == 0 {
		return nil
	}
	o := new(callOptions)
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// report fills the CallInfo o asks for from the call's result.
func (o *callOptions) report(res *Response, err error) {
	if o == nil || o.info == nil {
		return
	}
	switch {
	case res != nil:
		*o.info = CallInfo{Attempts: res.Attempts, Peer: res.Peer, Peers: res.Peers}
	default:
		var ce *CallError
		if errors.As(err, &ce) {
			*o.info = CallInfo{Attempts: ce.Attempts, Peer: ce.Peer, Peers: ce.Peers}
			if ce.Peer == "" && len(ce.Peers) > 0 {
				o.info.Peer = ce.Peers[len(ce.Peers)-1]
			}
		} else {
			*o.info = CallInfo{}
		}
	}
}
