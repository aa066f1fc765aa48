// Package thrift runs the Thrift clients and servers that tchannel-go's
// thrift-gen generates through a Sluice channel, unchanged.
//
// On the client side, NewClient returns a tchannel-go thrift.TChanClient: give
// it to the generated NewTChanXxxClient constructor and every call of the
// generated client goes through the Channel's pipeline (peer choice, busy
// throttling, retries or hedges, stats and spans). The request struct is
// encoded once per call, whatever the number of attempts; request headers come
// from the thrift.Context and response headers are set on it. Per-call
// options travel in the context too (WithCallOptions): any
// channel.CallOption, such as channel.ReportCallInfo for the attempts and
// peer of a call, channel.WaitForReady, or channel.WithShardKey and the
// other TChannel transport headers. The method name of a Thrift call is
// "Service::method" (the Thrift service's name, not the TChannel one):
// that is the name a service config's methodConfig uses, and the name
// metrics and channel.Inbound carry. The arguments
// travel exactly as tchannel-go's own client sends them (Thrift arg scheme,
// "Service::method", TChannel's Thrift header encoding in arg2, the binary
// protocol in arg3), so a Sluice client talks to any TChannel Thrift server.
//
// A declared exception (one in the method's throws clause) is an application
// error: a successful transport. Call reports it as success == false with a
// nil error, as tchannel-go's client does, and the generated code returns the
// typed exception. It is never retried and never counts as a failure for
// throttling. A failed call returns the Channel's error: a
// *channel.CallError carrying the TChannel code and the number of attempts,
// or a local error such as channel.ErrThrottled.
//
// On the server side, NewServer returns a Server: tchannel-go's
// *thrift.Server, every method of it, whose registrations sit behind the
// Channel's server guard (request counting, load shedding, declining while
// the Channel closes), and whose Register bounds each request body by the
// Channel's maximum request size. Generated TChanServer handlers register on
// it as they would on a plain tchannel-go channel. A handler answers Busy by returning
// channel.Busy(...); it reads the attempt number of a retried call with
// PreviousAttempts and asks the client to wait before retrying with
// SetPushback.
package thrift
