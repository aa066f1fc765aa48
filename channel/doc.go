// Package channel is Sluice's Channel: a TChannel client and server that
// handles overload by itself. A Channel serves its handlers and makes one
// Client per service it calls (NewClient), which holds that service's
// peers, lease gate, pacing and policies. A call takes its method's policy,
// passes the lease gate and pacing, then sends attempts, retried or hedged,
// to peers whose busy limiters allow them; the server sheds load. Both
// sides can speak TLS below TChannel (WithServerTLS, WithClientTLS), and
// handlers read the caller's certificate identity (PeerIdentity). See
// Client.Call, Channel and README.md.
package channel
