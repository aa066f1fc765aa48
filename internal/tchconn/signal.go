package tchconn

import (
	"fmt"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// The signal carrier: the one place where Sluice peers tell each other
// what tchannel-go's API has no room for (a handler cannot set a response's
// transport headers, error frames carry only a code and a message, ping
// responses and raw answers carry nothing of Sluice's). It works below
// tchannel-go, for raw, JSON and Thrift calls alike, and plain TChannel
// peers (tchannel-go, yab, Node) never see it.
//
// Negotiation. A Sluice client's init request carries the parameter
// sluice_signals=1; a Sluice server that reads it answers with the same
// parameter in its init response. Each side strips the parameters it
// reads before tchannel-go sees the frame. A connection is signalled when
// both announced: only then may either side send signal frames, and a
// signal frame on any other connection is a protocol error.
//
// Frames. A signal frame (tframe.Signal) carries key/value pairs, like
// transport headers, about the message with its id, or about the whole
// connection when its id is tframe.ConnID. Keys a peer does not know are
// ignored, so that new signals need no new negotiation.
//
// The signals:
//
//	drain=conn    (server to client, ConnID) close this connection once
//	              the calls on it are done, and make a new one when one
//	              is needed: the server would otherwise close it under a
//	              call on the wire (an idle connection; one evicted at
//	              the connection cap).
//	drain=server  (server to client, ConnID) the server is leaving
//	              (Shutdown): stop sending it calls, close the connection
//	              once its calls are done, and choose other peers.
//	load.u, load.qps, refusing
//	              (server to client, ConnID) a load report (load.go).
//
// A call's criticality class rides in its call request's routing
// delegate ("rd" transport header), after the byte ClassMark: tchannel-go
// has no room for a transport header of Sluice's own, but passes the
// routing delegate through both ways (package channel marks and reads it).
// Only a signalled connection carries the mark: on any other, a client's
// Conn cuts it from the call request before it leaves (a plain server or
// relay sees the caller's routing delegate, or none), and a server ignores
// a mark from a peer that did not announce signals.
//
// A server that is leaving when a signalled connection's handshake ends
// says so in its init response instead (sluice_drain=server), so that the
// client never counts it ready. Calls that reach a server on a drained
// connection are still served: they were sent before the client read the
// signal, and the connection stays open until the client closes it.
// ClassMark starts a criticality class's mark in a routing delegate: a
// byte no service name holds.
const ClassMark = 0x00

const (
	paramSignals = "sluice_signals" // init frames: this peer speaks signals
	paramDrain   = "sluice_drain"   // init response: drain, as the drain key says
	signalsV1    = "1"
	keyDrain     = "drain"
)

// Drain is what a server asks of a client's connection through the
// carrier. A later Drain only ever strengthens an earlier one.
type Drain uint32

const (
	// DrainNone: nothing asked.
	DrainNone Drain = iota
	// DrainConn: close this connection once its calls are done, and make
	// another when a call needs one.
	DrainConn
	// DrainServer: the server is leaving: close this connection once its
	// calls are done, and send the server no new calls.
	DrainServer
)

// String returns the drain's value on the wire.
func (d Drain) String() string {
	switch d {
	case DrainNone:
		return ""
	case DrainConn:
		return "conn"
	case DrainServer:
		return "server"
	}
	return fmt.Sprintf("Drain(%d)", uint32(d))
}

// parseDrain reads a drain value; an unknown one asks nothing.
func parseDrain(v []byte) Drain {
	switch string(v) {
	case "conn":
		return DrainConn
	case "server":
		return DrainServer
	}
	return DrainNone
}

// Signalled reports whether both ends of the connection announced
// signals. For an inbound connection it is known once the Guard's Gate has
// returned it; for an outbound one, once its handshake is done.
func (c *Conn) Signalled() bool { return c.signals.Load() }

// Drained returns a channel closed once the server at the other end of an
// outbound connection asked it to drain (see DrainKind). It is never
// closed for inbound connections.
func (c *Conn) Drained() <-chan struct{} { return c.drained }

// DrainKind returns what the server asked of an outbound connection.
func (c *Conn) DrainKind() Drain { return Drain(c.drainKind.Load()) }

// PeerLeaving reports whether the server at the other end of an outbound
// connection said it is leaving (DrainServer).
func (c *Conn) PeerLeaving() bool { return c.DrainKind() == DrainServer }

// AskToDrain asks the client of an inbound connection to close it once
// its calls are done and to reconnect when it needs to (DrainConn). It
// reports false, asking nothing, when the client did not announce
// signals: only closing the connection ends it then. It never blocks.
func (c *Conn) AskToDrain() bool {
	if !c.inbound || !c.signals.Load() {
		return false
	}
	c.askDrain(DrainConn)
	return true
}

// Leave tells the clients of the Guard's signalled inbound connections,
// and of those that complete their handshake from now on, that the server
// is leaving (DrainServer). It never blocks.
func (g *Guard) Leave() {
	if g.leaving.Swap(true) {
		return
	}
	g.mu.Lock()
	var conns []*Conn
	for c := range g.conns {
		if c.inbound && c.counted == countedSignalled {
			conns = append(conns, c)
		}
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.askDrain(DrainServer)
	}
}

// Inbound returns the inbound connections open, those whose client
// announced signals and the others, and the calls that have come on the
// others since the Guard was made.
func (g *Guard) Inbound() (signalled, plain int, plainCalls uint64) {
	g.mu.Lock()
	signalled, plain = g.inSignalled, g.inPlain
	g.mu.Unlock()
	return signalled, plain, g.plainCalls.Load()
}

// askDrain sends the drain d to the client, from a goroutine of its own:
// the write waits for tchannel-go's frame in progress and, if the client
// does not read, for the stall timeout. Before the init response is
// written, d goes in it instead.
func (c *Conn) askDrain(d Drain) {
	go func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		switch {
		case d <= c.drainSent:
		case !c.initWritten:
			c.drainWant = max(c.drainWant, d)
		case c.signals.Load():
			c.drainSent = d
			c.writeOwn(tframe.AppendSignal(nil, tframe.ConnID, [][2]string{{keyDrain, d.String()}}))
		}
	}()
}

// gotDrain records the drain d a server asked of this outbound connection.
func (c *Conn) gotDrain(d Drain) {
	for {
		old := Drain(c.drainKind.Load())
		if d <= old {
			return
		}
		if c.drainKind.CompareAndSwap(uint32(old), uint32(d)) {
			if old == DrainNone {
				close(c.drained)
			}
			return
		}
	}
}

// readInit handles the parameters of the connection's first frame, an
// init frame Parse accepted: it notes the signals and the drain the peer
// announced, and returns the frame to hand tchannel-go, without them.
func (c *Conn) readInit(f []byte) []byte {
	version, params := tframe.InitParamsOf(f)
	kept := params[:0]
	for _, kv := range params {
		switch kv[0] {
		case paramSignals:
			if kv[1] != "" {
				c.signals.Store(true)
			}
		case paramDrain:
			if !c.inbound {
				c.gotDrain(parseDrain([]byte(kv[1])))
			}
		default:
			kept = append(kept, kv)
		}
	}
	if len(kept) == len(params) {
		return f
	}
	h := tframe.ParseHeader(f)
	return tframe.AppendInit(nil, h.Type, h.ID, tframe.Init{Version: version, Params: kept})
}

// writeInit returns the connection's first frame b, tchannel-go's init
// frame, with this Conn's parameters added: a client's announces signals;
// a server's answers a client that announced them, and carries the drain
// asked so far. It returns b itself when it adds nothing. Call it with wmu
// held.
func (c *Conn) writeInit(b []byte) []byte {
	want := tframe.InitReq
	if c.inbound {
		want = tframe.InitRes
	}
	fr, err := tframe.Parse(b)
	switch {
	case c.inbound && !c.signals.Load():
		return b
	case err != nil || fr.Type != want:
		// Never with tchannel-go, which writes each frame whole; the
		// connection then goes unsignalled, as with a plain peer.
		c.unsignal()
		return b
	}
	version, params := tframe.InitParamsOf(b)
	params = append(params, [2]string{paramSignals, signalsV1})
	d := c.drainWant
	if c.inbound && c.g.leaving.Load() {
		d = DrainServer
	}
	if d != DrainNone {
		params = append(params, [2]string{paramDrain, d.String()})
	}
	out := tframe.AppendInit(nil, fr.Type, fr.ID, tframe.Init{Version: version, Params: params})
	if len(out) > tframe.MaxSize {
		c.unsignal() // never with tchannel-go's init frames (about 150 bytes)
		return b
	}
	c.drainSent = d
	return out
}

// readSignal handles a signal frame Parse accepted, from a peer that
// announced signals.
func (c *Conn) readSignal(fr tframe.Frame, f []byte) {
	if fr.ID != tframe.ConnID {
		return // no signal is about one message yet
	}
	var l Load
	isLoad := false
	tframe.SignalPairs(f[tframe.HeaderSize:], func(k, v []byte) {
		switch {
		case c.inbound:
		case string(k) == keyDrain:
			c.gotDrain(parseDrain(v))
		case readLoad(&l, k, v):
			isLoad = true
		}
	})
	if isLoad {
		c.gotLoad(l)
	}
}

// unsignal makes a connection whose init frame could not carry the
// announcement unsignalled, and counts it so. Call it with wmu held.
func (c *Conn) unsignal() {
	c.signals.Store(false)
	g := c.g
	g.mu.Lock()
	if c.counted == countedSignalled {
		c.counted = countedPlain
		g.inSignalled--
		g.inPlain++
	}
	g.mu.Unlock()
}
