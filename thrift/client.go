package thrift

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/uber/tchannel-go"
	athrift "github.com/uber/tchannel-go/thirdparty/github.com/apache/thrift/lib/go/thrift"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// maxPooledBuffer is the largest encoding buffer kept for reuse; larger ones
// are left to the garbage collector so one big request does not pin memory.
const maxPooledBuffer = 64 << 10

// maxMethodNames bounds a client's cache of "Service::method" names.
const maxMethodNames = 256

var errNilClient = errors.New("sluice: thrift: the client has no channel.Client; make it with NewClient(cl) and a non-nil cl from Channel.NewClient")

// NewClient returns a thrift.TChanClient that sends every call through
// cl's pipeline, to cl's service (the TChannel service name the servers
// register under). Wrap it in a generated client:
//
//	kvc, err := ch.NewClient("keyvalue", channel.WithMethods("KeyValue::Get"))
//	...
//	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(kvc))
//
// The client is safe for concurrent use and cheap: make one per
// channel.Client and keep it.
func NewClient(cl *channel.Client) tthrift.TChanClient {
	c := &client{cl: cl}
	if cl != nil {
		c.service = cl.Service()
	}
	return c
}

// client implements tthrift.TChanClient on a Sluice channel.Client.
type client struct {
	cl      *channel.Client
	service string

	// names caches thriftService+"::"+method so calls do not build the
	// string each time. Readers load the map; writers copy it under mu.
	names atomic.Pointer[map[methodKey]string]
	mu    sync.Mutex
}

type methodKey struct{ service, method string }

// Call sends req as thriftService::methodName with ctx's headers and the
// call options ctx carries (WithCallOptions, and the shard key, routing
// key and routing delegate of tchannel-go's ContextBuilder, which the
// Channel reads as channel.WithShardKey says), reads the response into resp
// and sets ctx's response headers. It returns success == false with a nil
// error when the server answered with a declared exception (which resp
// then holds), and a non-nil error when the call failed.
func (c *client) Call(ctx tthrift.Context, thriftService, methodName string, req, resp athrift.TStruct) (bool, error) {
	if c.cl == nil {
		return false, errNilClient
	}
	method := c.methodName(thriftService, methodName)
	cd := getCodec()
	defer putCodec(cd)
	if err := tthrift.WriteStruct(&cd.buf, req); err != nil {
		return false, fmt.Errorf("sluice: thrift: call %s::%s: cannot encode the request: %w", c.service, method, err)
	}
	cd.req = channel.Request{Format: tchannel.Thrift, Headers: ctx.Headers(), Arg3: cd.buf.Bytes()}
	var opts []channel.CallOption
	if p, _ := ctx.Value(callOptionsKey{}).(*[]channel.CallOption); p != nil {
		opts = *p
	}
	res, err := c.cl.Call(ctx, method, &cd.req, opts...)
	if err != nil {
		return false, err
	}
	cd.rd.Reset(res.Arg3)
	if err := tthrift.ReadStruct(&cd.rd, resp); err != nil {
		return false, fmt.Errorf("sluice: thrift: call %s::%s: cannot decode the response from %s: %w", c.service, method, res.Peer, err)
	}
	if n := cd.rd.Len(); n > 0 {
		return false, fmt.Errorf("sluice: thrift: call %s::%s: the response from %s has %d bytes after its struct", c.service, method, res.Peer, n)
	}
	ctx.SetResponseHeaders(res.Headers)
	return !res.AppError, nil
}

// callOptionsKey is the context key of the call options WithCallOptions
// adds.
type callOptionsKey struct{}

// WithCallOptions returns a Thrift context for calls through a client of
// NewClient that pass opts to the Channel's Call, after any options ctx
// carries already (a later option wins where two set the same thing). The
// context is ctx in every other respect: its deadline and cancellation,
// its request headers (tchannel-go's thrift.WithHeaders), and its response
// headers, which a call sets on ctx's too, so ctx.ResponseHeaders() and
// the returned context's ResponseHeaders() read the same map.
//
// Any channel.CallOption applies: channel.ReportCallInfo to learn the
// attempts and peers of a call (the generated client returns only the
// result), channel.WaitForReady, channel.WithShardKey and the other
// transport headers. channel.WithHeaders adds headers to ctx's ones, and
// channel.ResponseHeaders stores the response headers, as for Call. Each
// call made with the context applies the options anew: a ReportCallInfo
// destination holds the last call's. Calls made at once with one context
// write the same destinations: give each concurrent call a context of its
// own when the options report (ReportCallInfo, ResponseHeaders).
//
//	var info channel.CallInfo
//	v, err := kv.Get(thrift.WithCallOptions(ctx, channel.WithShardKey(user), channel.ReportCallInfo(&info)), key)
//
// A client that is not NewClient's (tchannel-go's own) ignores them.
func WithCallOptions(ctx tthrift.Context, opts ...channel.CallOption) tthrift.Context {
	var prev []channel.CallOption
	if p, _ := ctx.Value(callOptionsKey{}).(*[]channel.CallOption); p != nil {
		prev = *p
	}
	all := make([]channel.CallOption, 0, len(prev)+len(opts))
	all = append(append(all, prev...), opts...)
	return optionsContext{Context: ctx, opts: &all}
}

// optionsContext is ctx, with call options under callOptionsKey. Its
// header methods are ctx's own, so both share request and response
// headers.
type optionsContext struct {
	tthrift.Context
	opts *[]channel.CallOption // a pointer: Value returns it without allocating
}

func (c optionsContext) Value(key any) any {
	if key == (callOptionsKey{}) {
		return c.opts
	}
	return c.Context.Value(key)
}

// Child returns ctx's Child (headers of its own, copied) with the same
// call options.
func (c optionsContext) Child() tchannel.ContextWithHeaders {
	return optionsContext{Context: c.Context.Child(), opts: c.opts}
}

// methodName returns thriftService::method, from the cache when it can.
func (c *client) methodName(service, method string) string {
	k := methodKey{service, method}
	if m := c.names.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	s := service + "::" + method
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.names.Load()
	if old != nil && len(*old) >= maxMethodNames {
		return s
	}
	m := make(map[methodKey]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = s
	c.names.Store(&m)
	return s
}

func lenOf(m *map[methodKey]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// codec is the per-call scratch space: the encoded request, the Request
// handed to the channel and the reader of the response. The channel does not
// keep a Request after Call returns (attempts, hedges included, have all
// ended by then), so the codec goes back to the pool at the end of the call.
type codec struct {
	buf bytes.Buffer
	rd  bytes.Reader
	req channel.Request
}

var codecs = sync.Pool{New: func() any { return new(codec) }}

func getCodec() *codec { return codecs.Get().(*codec) }

func putCodec(cd *codec) {
	if cd.buf.Cap() > maxPooledBuffer {
		return
	}
	cd.buf.Reset()
	cd.rd.Reset(nil)
	cd.req = channel.Request{}
	codecs.Put(cd)
}
