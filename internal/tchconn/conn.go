package tchconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// The first two bytes of a TLS handshake record (a ClientHello): the
// record type and the major version, 3 in every TLS version.
const (
	tlsHandshake = 0x16
	tlsMajor     = 0x03
)

// errTLSClient is the error of an inbound connection that begins with a
// TLS handshake record.
var errTLSClient = &tframe.ProtocolError{Reason: "the connection begins with a TLS handshake record: a TLS client on a plaintext TChannel port"}

// discardTLSRecord reads the rest of the TLS record at the start of the
// buffer, its 5-byte header and its length, from the socket: answered and
// closed with those bytes unread, the connection would be reset, and the
// client could lose the answer.
func (c *Conn) discardTLSRecord() {
	if c.w-c.r < 5 {
		return
	}
	rest := 5 + int(binary.BigEndian.Uint16(c.buf[c.r+3:])) - (c.w - c.r)
	// Into the small buffer, whose bytes are handled: io.CopyN would link
	// io.Copy's splice and sendfile paths into every program.
	for rest > 0 {
		n, err := c.Conn.Read(c.small[:min(rest, len(c.small))])
		rest -= n
		if err != nil {
			return
		}
	}
}

// Buffer sizes. Every Conn has a small buffer: enough for the frames of a
// small call, read in one system call. A larger frame borrows a bigger
// buffer once the smaller one is full of its bytes, first a mid-size one,
// then one for the largest frame and what follows it in the same read, so
// that what a connection holds follows the bytes that came, not what a
// frame's size field claims.
const (
	smallSize = 512
	midSize   = 4 << 10
	bigSize   = tframe.MaxSize + 4<<10
)

var (
	midBuffers = sync.Pool{New: func() any { b := make([]byte, midSize); return &b }}
	bigBuffers = sync.Pool{New: func() any { b := make([]byte, bigSize); return &b }}
)

// Conn is a TChannel connection behind a Guard: tchannel-go reads only
// frames that passed the checks, and the requests the peer sends are kept
// within the Guard's limits (see the package doc). tchannel-go must write
// whole frames, one or more per Write, as it does.
type Conn struct {
	net.Conn
	g       *Guard
	lim     Activity // nil: not a connection the listener counts
	inbound bool
	peer    string

	// The reader's own: tchannel-go reads a connection from one goroutine.
	small  [smallSize]byte
	buf    []byte  // small[:], *pooled, or the first frame's own
	pooled *[]byte // the pooled buffer buf is, if it is one
	pool   *sync.Pool
	r, w   int    // buf[r:w] came from the socket and is not yet handled
	out    []byte // to hand to the reader next: a checked frame, or synth
	synth  []byte // frames this Conn makes up for tchannel-go (cancels)
	first  bool   // the next frame is the connection's first
	rerr   error  // the error every Read returns from now on

	// partialSince is the Guard's time when the reader began to wait for
	// the rest of a frame; 0 when it waits for none.
	partialSince atomic.Int64
	// stalled is set when the Guard closes the connection for a frame that
	// stopped coming: Read then returns errStalled.
	stalled atomic.Bool

	// Guarded by g.mu.
	reqs       map[uint32]*request // multi-fragment requests in flight, not yet whole
	unfinished int64               // what they are charged
	gone       bool                // forgotten: nothing more is charged
	drops      []drop              // decided elsewhere, for the reader to carry out
	nreqs      atomic.Int32        // len(reqs), read without the lock
	ndrops     atomic.Int32        // len(drops), read without the lock

	dmu           sync.Mutex
	readDeadline  time.Time // the reader's own deadline (tchannel-go's)
	writeDeadline time.Time // the writer's own

	wmu   sync.Mutex
	wleft int // bytes of the frame being written still to come
	whdr  [tframe.HeaderSize]byte
	whn   int // bytes of a frame header written in pieces so far

	calls atomic.Int32 // calls in flight (BeginCall)

	// Answers owed (answers.go), guarded by amu.
	amu        sync.Mutex
	answers    map[uint32]owed // calls whose answers are not yet written (kept while small: see unowe)
	answersBig bool            // answers held more than answersKept since it was made
	owedBytes  int64           // what they are charged
	unowed     bool            // closed, or closing to make room: charged nothing more
	idleGen    uint32          // the sweep's: wgen at its last look
	idleAt     int64           // and when
	nowed      atomic.Int32    // len(answers), read without the lock
	owedNow    atomic.Int64    // owedBytes, read without the lock
	closing    atomic.Bool     // picked to be closed to make room
	// wgen counts the starts and ends of writes to the socket: odd while
	// one is in progress.
	wgen atomic.Uint32
	// wflags: the frame whose header was written last still waits for its
	// first payload byte, its flags. Guarded by wmu.
	wflags    bool
	wflagsHdr tframe.Header
	once      sync.Once
	// peerProtocolErr is the first protocol error the peer reported in
	// an error frame, on which tchannel-go closes the connection.
	peerProtocolErr atomic.Pointer[error]

	// The signal carrier (signal.go).
	signals   atomic.Bool   // both ends announced signals
	counted   int8          // inbound: how the Guard counts it (countedSignalled, countedPlain); guarded by g.mu
	drained   chan struct{} // outbound: closed at the first drain the server asks
	drainKind atomic.Uint32 // outbound: the strongest drain the server asked
	// Guarded by wmu.
	initWritten bool  // tchannel-go's init frame has been written
	drainSent   Drain // inbound: the strongest drain sent to the client
	drainWant   Drain // inbound: asked before the init response, which carries it
	loadState         // load reports (load.go)
}

// How a Guard counts an inbound connection, once its init request is read.
const (
	countedSignalled = 1
	countedPlain     = 2
)

// request is a multi-fragment request tchannel-go has and whose last
// fragment has not come. A request refused, dropped, cancelled or answered
// is forgotten: a continuation nothing expects is swallowed.
type request struct {
	bytes  int64 // charged: its frames, at least minRequest
	lastAt int64 // the Guard's time of its last fragment
}

// minRequest is the least a request in flight is charged, whatever its
// first fragment's size: tchannel-go's exchange, its goroutines and the
// handler's cost about 10 KB beyond the request's bytes.
const minRequest = 16 << 10

// drop is a request to drop, decided off the reader's goroutine.
type drop struct {
	id   uint32
	code byte
	kind EventKind
	err  error
}

// Read hands on the checked frames of the connection.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		}
		if c.rerr != nil {
			return 0, c.rerr
		}
		if c.ndrops.Load() > 0 {
			c.applyDrops()
			continue
		}
		f, err := c.next()
		if err == nil && f != nil {
			c.out, err = c.handle(f)
		}
		if err != nil {
			c.invalid(err)
			continue
		}
		if f != nil {
			continue
		}
		if err := c.fill(); err != nil {
			if c.interrupted(err) {
				continue
			}
			if c.stalled.Load() {
				err = fmt.Errorf("tchconn: %s sent an %w", c.peer, errStalled(c.g.lim.StallTimeout))
			}
			c.rerr = err
			c.forget()
		}
	}
}

// next returns the next whole frame in the buffer, or nil if there is
// none yet.
func (c *Conn) next() ([]byte, error) {
	avail := c.w - c.r
	if avail < 2 {
		return nil, nil
	}
	size := int(binary.BigEndian.Uint16(c.buf[c.r:]))
	switch {
	case c.first && c.inbound && c.buf[c.r] == tlsHandshake && c.buf[c.r+1] == tlsMajor:
		// An init frame of 0x1603 bytes, which no implementation sends
		// (tchannel-go's are about 150), or a TLS client: answered at
		// once, it learns that this port speaks plaintext instead of
		// waiting out the handshake timeout.
		return nil, errTLSClient
	case size < tframe.HeaderSize:
		return nil, &tframe.ProtocolError{Reason: fmt.Sprintf("size field is %d, smaller than a frame header (%d)", size, tframe.HeaderSize)}
	case c.first && size > MaxInitSize:
		return nil, &tframe.ProtocolError{Reason: fmt.Sprintf("the first frame has %d bytes; an init frame has at most %d", size, MaxInitSize)}
	case avail < size:
		return nil, nil
	}
	f := c.buf[c.r : c.r+size]
	c.r += size
	if c.partialSince.Load() != 0 {
		c.partialSince.Store(0)
	}
	return f, nil
}

// fill reads from the socket what comes, into room for at least the rest
// of the frame that is arriving, growing the buffer only once it is full of
// that frame's bytes.
func (c *Conn) fill() error {
	if c.r == c.w {
		c.r, c.w = 0, 0
		if c.pooled != nil || len(c.buf) != smallSize {
			// Nothing is buffered: wait for the next frame in the small
			// buffer, so that an idle connection holds no other.
			c.release()
		}
	}
	need := 0 // the whole frame, when its size is known
	if c.w-c.r >= 2 {
		need = int(binary.BigEndian.Uint16(c.buf[c.r:]))
	}
	if c.r > 0 && (need > len(c.buf)-c.r || c.w == len(c.buf)) {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.buf) {
		c.grow(need)
	}
	if c.w > c.r && c.partialSince.Load() == 0 {
		c.partialSince.Store(max(1, c.g.now.Load()))
	}
	n, err := c.Conn.Read(c.buf[c.w:])
	c.w += n
	if n > 0 {
		return nil // an error comes again at the next read
	}
	if err == nil {
		err = errors.New("tchconn: read returned nothing")
	}
	return err
}

// grow moves the buffered bytes (all of one frame, need bytes long) to a
// bigger buffer: the mid-size one, then the big one; a first frame, at most
// MaxInitSize, gets a buffer of its size instead of the big one.
func (c *Conn) grow(need int) {
	var next []byte
	var pooled *[]byte
	var pool *sync.Pool
	switch {
	case len(c.buf) < midSize:
		pooled, pool = midBuffers.Get().(*[]byte), &midBuffers
		next = *pooled
	case c.first:
		next = make([]byte, need)
	default:
		pooled, pool = bigBuffers.Get().(*[]byte), &bigBuffers
		next = *pooled
	}
	c.w = copy(next, c.buf[:c.w])
	c.release()
	c.buf, c.pooled, c.pool = next, pooled, pool
}

// release gives back the pooled buffer, if any, and returns to the small
// one. Call it only when nothing in the buffer is still to be handed on.
func (c *Conn) release() {
	if c.pooled != nil {
		c.pool.Put(c.pooled)
	}
	c.buf, c.pooled, c.pool = c.small[:], nil, nil
}

// interrupted reports whether err is a timeout that is not the reader's:
// a Guard's interrupt, which ends a read so that the reader carries out a
// drop. It restores the reader's own deadline.
func (c *Conn) interrupted(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false // a socket error, even a timeout of TCP's own
	}
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if d := c.readDeadline; !d.IsZero() && !time.Now().Before(d) {
		return false
	}
	return c.Conn.SetReadDeadline(c.readDeadline) == nil
}

// interrupt ends the reader's read in progress, if any, so that it sees
// the drops queued for it.
func (c *Conn) interrupt() { _ = c.Conn.SetReadDeadline(time.Now()) }

// SetReadDeadline sets the reader's deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.readDeadline = t
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the writer's deadline. It does not wait for a
// write in progress: a deadline is how a stuck write is ended.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.writeDeadline = t
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// handle checks a frame and returns what to hand tchannel-go for it: the
// frame, nothing, or a cancel in its place.
func (c *Conn) handle(f []byte) ([]byte, error) {
	fr, err := tframe.Parse(f)
	if err != nil {
		return nil, err
	}
	if c.first {
		want := tframe.InitRes
		if c.inbound {
			want = tframe.InitReq
		}
		if fr.Type != want && (c.inbound || fr.Type != tframe.Error) {
			return nil, &tframe.ProtocolError{Type: fr.Type, ID: fr.ID, Reason: fmt.Sprintf("the first frame must be an %v", want)}
		}
		c.first = false
		return c.readInit(f), nil
	}
	switch fr.Type {
	case tframe.InitReq, tframe.InitRes:
		return nil, &tframe.ProtocolError{Type: fr.Type, ID: fr.ID, Reason: "an init frame after the handshake"}
	case tframe.CallReq:
		c.active()
		if c.inbound && !c.signals.Load() {
			c.g.plainCalls.Add(1)
		}
		if !c.owe(fr, f) {
			return nil, nil // answered BUSY; its later fragments are swallowed
		}
		if !fr.More && c.nreqs.Load() == 0 {
			return f, nil
		}
		out := c.request(fr, f)
		if out == nil {
			c.answered(fr.ID) // refused, with an answer of the Conn's own
		}
		return out, nil
	case tframe.CallReqContinue:
		c.active()
		out := c.continuation(fr, f)
		if len(out) > 0 && &out[0] == &f[0] {
			c.oweMore(fr.ID, len(f))
		}
		return out, nil
	case tframe.Cancel:
		if c.nreqs.Load() > 0 {
			c.settled(fr.ID)
		}
		c.cancelled(fr.ID)
	case tframe.CallRes, tframe.CallResContinue:
		c.active()
	case tframe.Error:
		c.active()
		if code, msg, _ := tframe.ParseError(f[tframe.HeaderSize:]); code == errCodeProtocol && c.peerProtocolErr.Load() == nil {
			// tchannel-go closes the connection on it: keep why, for
			// whoever asks why the connection ended.
			err := fmt.Errorf("tchconn: %s reported a protocol error: %s", c.peer, msg)
			c.peerProtocolErr.CompareAndSwap(nil, &err)
		}
	case tframe.Signal:
		if !c.signals.Load() {
			return nil, &tframe.ProtocolError{Type: fr.Type, ID: fr.ID, Reason: "a signal frame on a connection whose peers did not both announce signals"}
		}
		c.readSignal(fr, f)
		return nil, nil
	}
	return f, nil
}

func (c *Conn) active() {
	if c.lim != nil {
		c.lim.Active()
	}
}

// request handles a call request's first frame.
func (c *Conn) request(fr tframe.Frame, f []byte) []byte {
	g := c.g
	g.mu.Lock()
	if c.gone || !fr.More || c.reqs[fr.ID] != nil {
		// Whole in one frame; or the connection is closing; or a request
		// reusing the id of one still arriving, which tchannel-go answers
		// with a protocol error.
		g.mu.Unlock()
		return f
	}
	cost := max(int64(len(f)), minRequest)
	victim, err := g.admit(c, cost)
	if err != nil {
		g.mu.Unlock()
		g.report(Event{Kind: RequestRefused, Peer: c.peer, Inbound: c.inbound, ID: fr.ID, Err: err})
		c.sendError(fr.ID, errCodeBusy, err.Error())
		return nil // its later fragments are swallowed: nothing expects them
	}
	c.setReq(fr.ID, &request{bytes: cost, lastAt: g.now.Load()})
	g.mu.Unlock()
	if victim != nil {
		victim.interrupt()
	}
	return f
}

// continuation handles a later fragment of a request.
func (c *Conn) continuation(fr tframe.Frame, f []byte) []byte {
	g := c.g
	g.mu.Lock()
	r := c.reqs[fr.ID]
	switch {
	case c.gone:
		g.mu.Unlock()
		return f
	case r == nil:
		// Nothing expects it: its request was refused, dropped or
		// answered (tchannel-go would log and drop it).
		g.mu.Unlock()
		return nil
	case !fr.More:
		// The last fragment: the request is whole, and its bytes are
		// its handler's to bound from now on.
		g.charge(c, -r.bytes)
		c.delReq(fr.ID)
		g.mu.Unlock()
		return f
	}
	r.lastAt = g.now.Load()
	victim, err := g.admit(c, int64(len(f)))
	if err != nil {
		g.charge(c, -r.bytes)
		c.delReq(fr.ID)
		g.mu.Unlock()
		g.report(Event{Kind: RequestDropped, Peer: c.peer, Inbound: c.inbound, ID: fr.ID, Err: err})
		c.sendError(fr.ID, errCodeBusy, err.Error())
		c.answered(fr.ID)
		c.synth = tframe.AppendCancel(c.synth[:0], fr.ID, err.Error())
		return c.synth
	}
	r.bytes += int64(len(f))
	g.mu.Unlock()
	if victim != nil {
		victim.interrupt()
	}
	return f
}

// settled forgets request id, cancelled by the peer or answered by
// tchannel-go before its last fragment: its later fragments are swallowed.
func (c *Conn) settled(id uint32) {
	g := c.g
	g.mu.Lock()
	if r := c.reqs[id]; r != nil {
		g.charge(c, -r.bytes)
		c.delReq(id)
	}
	g.mu.Unlock()
}

// setReq and delReq change c.reqs; call them with g.mu held.
func (c *Conn) setReq(id uint32, r *request) {
	if c.reqs == nil {
		c.reqs = map[uint32]*request{}
	}
	c.reqs[id] = r
	c.nreqs.Store(int32(len(c.reqs)))
}

func (c *Conn) delReq(id uint32) {
	delete(c.reqs, id)
	if len(c.reqs) == 0 {
		c.reqs = nil // a map does not shrink: let a flood's go
	}
	c.nreqs.Store(int32(len(c.reqs)))
}

// largest returns the id of c's largest request and whether it has one.
// Call it with g.mu held.
func (c *Conn) largest() (uint32, bool) {
	var id uint32
	var most int64 = -1
	for i, r := range c.reqs {
		if r.bytes > most {
			id, most = i, r.bytes
		}
	}
	return id, most >= 0
}

// dropLocked drops request id: its bytes are released now, and the
// reader answers the peer with code and cancels the handler. Call it with
// g.mu held, then interrupt c.
func (c *Conn) dropLocked(id uint32, code byte, kind EventKind, err error) {
	r := c.reqs[id]
	if r == nil {
		return
	}
	c.g.charge(c, -r.bytes)
	c.delReq(id)
	c.drops = append(c.drops, drop{id: id, code: code, kind: kind, err: err})
	c.ndrops.Store(int32(len(c.drops)))
}

// sweepRequests drops c's requests whose fragments stopped coming, and
// reports whether it dropped any. Call it with g.mu held.
func (c *Conn) sweepRequests(now, stall int64) bool {
	dropped := false
	for id, r := range c.reqs {
		if now-r.lastAt >= stall {
			c.dropLocked(id, errCodeTimeout, RequestStalled,
				fmt.Errorf("request timed out: its fragments stopped coming for %v", time.Duration(stall)))
			dropped = true
		}
	}
	return dropped
}

// applyDrops carries out the drops decided for c elsewhere: it reports
// each, answers it to the peer and hands tchannel-go a cancel for it.
func (c *Conn) applyDrops() {
	g := c.g
	g.mu.Lock()
	drops := c.drops
	c.drops = nil
	c.ndrops.Store(0)
	g.mu.Unlock()
	c.synth = c.synth[:0]
	for _, d := range drops {
		g.report(Event{Kind: d.kind, Peer: c.peer, Inbound: c.inbound, ID: d.id, Err: d.err})
		c.sendError(d.id, d.code, d.err.Error())
		c.answered(d.id)
		c.synth = tframe.AppendCancel(c.synth, d.id, d.err.Error())
	}
	c.out = c.synth
}

// invalid ends the connection for a frame that breaks the protocol: the
// peer is told why (if the writer is free), and every Read from now on
// returns the error, so tchannel-go closes the connection.
func (c *Conn) invalid(err error) {
	c.rerr = fmt.Errorf("tchconn: %s sent an %w", c.peer, err)
	c.out = nil
	var pe *tframe.ProtocolError
	id := uint32(0xFFFFFFFF)
	if errors.As(err, &pe) && pe.Type != 0 {
		id = pe.ID
	}
	c.g.report(Event{Kind: InvalidFrame, Peer: c.peer, Inbound: c.inbound, ID: id, Err: err})
	if c.wmu.TryLock() {
		c.writeOwn(tframe.AppendError(nil, id, errCodeProtocol, err.Error()))
		c.wmu.Unlock()
	}
	c.forget()
}

// sendError answers request id to the peer with a system error.
func (c *Conn) sendError(id uint32, code byte, msg string) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	f := tframe.AppendError(nil, id, code, msg)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writeOwn(f)
}

// writeOwn writes a frame of the Conn's own between tchannel-go's frames,
// bounded by the stall timeout. Call it with wmu held.
func (c *Conn) writeOwn(f []byte) {
	if c.wleft > 0 || c.whn > 0 {
		return // never happens: tchannel-go writes whole frames
	}
	if d := c.g.lim.StallTimeout; d > 0 {
		c.dmu.Lock()
		own := c.writeDeadline
		if own.IsZero() || time.Until(own) > d {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(d))
		}
		c.dmu.Unlock()
		defer func() {
			c.dmu.Lock()
			_ = c.Conn.SetWriteDeadline(c.writeDeadline)
			c.dmu.Unlock()
		}()
	}
	c.wgen.Add(1)
	_, _ = c.Conn.Write(f)
	c.wgen.Add(1)
}

// Write writes tchannel-go's frames, noting the responses that answer a
// request before its last fragment.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.initWritten {
		c.initWritten = true
		if out := c.writeInit(b); len(out) != len(b) {
			c.scanWritten(out)
			c.wgen.Add(1)
			_, err := c.Conn.Write(out)
			c.wgen.Add(1)
			if err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	if !c.inbound && len(b) > 2 && tframe.Type(b[2]) == tframe.CallReq && !c.signals.Load() {
		// A plain peer must not see a class mark (see ClassMark).
		if out, cut := tframe.CutRoutingDelegate(b, ClassMark); cut {
			c.scanWritten(out)
			c.wgen.Add(1)
			_, err := c.Conn.Write(out)
			c.wgen.Add(1)
			if err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	c.scanWritten(b)
	c.wgen.Add(1)
	n, err := c.Conn.Write(b)
	c.wgen.Add(1)
	if c.inbound && err == nil && len(b) > 2 {
		switch tframe.Type(b[2]) {
		case tframe.CallRes:
			// Load reports count the answers that were not errors; without
			// them nothing reads the count, and all connections would
			// write one shared word an answer for nothing.
			if c.g.loadReporter.Load() != nil {
				c.g.served.Add(1)
			}
			fallthrough
		case tframe.Error:
			if c.signals.Load() {
				c.afterAnswer()
			}
		}
	}
	return n, err
}

// scanWritten follows the frames in the written bytes b.
func (c *Conn) scanWritten(b []byte) {
	for len(b) > 0 {
		if c.wflags {
			c.wflags = false
			c.writtenFrame(c.wflagsHdr, b[0], true)
		}
		if c.wleft > 0 {
			k := min(c.wleft, len(b))
			c.wleft -= k
			b = b[k:]
			continue
		}
		var h tframe.Header
		if c.whn > 0 || len(b) < tframe.HeaderSize {
			k := copy(c.whdr[c.whn:], b)
			c.whn += k
			b = b[k:]
			if c.whn < tframe.HeaderSize {
				return
			}
			h, c.whn = tframe.ParseHeader(c.whdr[:]), 0
		} else {
			h = tframe.ParseHeader(b)
			b = b[tframe.HeaderSize:]
		}
		c.wleft = max(0, int(h.Size)-tframe.HeaderSize)
		if (h.Type == tframe.CallRes || h.Type == tframe.Error) && c.nreqs.Load() > 0 {
			c.settled(h.ID)
		}
		if c.nowed.Load() > 0 {
			if len(b) > 0 || c.wleft == 0 {
				c.writtenFrame(h, firstByte(b), len(b) > 0)
			} else {
				c.wflags, c.wflagsHdr = true, h
			}
		}
	}
}

// BeginCall counts a call the connection's peer made, and reports whether
// it is within MaxCallsPerConn; if it is, EndCall must follow.
func (c *Conn) BeginCall() bool {
	max := c.g.lim.MaxCallsPerConn
	if n := c.calls.Add(1); max > 0 && int(n) > max {
		c.calls.Add(-1)
		c.g.report(Event{Kind: CallRefused, Peer: c.peer, Inbound: c.inbound,
			Err: fmt.Errorf("server busy: this connection has %d calls in flight, its limit; wait for their answers", max)})
		return false
	}
	if c.lim != nil {
		c.lim.Begin()
	}
	return true
}

// EndCall ends a call BeginCall counted.
func (c *Conn) EndCall() {
	c.calls.Add(-1)
	if c.lim != nil {
		c.lim.End()
	}
}

// PeerProtocolError returns the first protocol error the peer reported on
// the connection (tchannel-go closes a connection on one: a tchannel-go
// server that is closing answers a ping so), or nil.
func (c *Conn) PeerProtocolError() error {
	if p := c.peerProtocolErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Peer returns the remote address.
func (c *Conn) Peer() string { return c.peer }

// Close closes the connection and releases what its requests held.
func (c *Conn) Close() error {
	c.forget()
	return c.Conn.Close()
}

// forget stops counting c in its Guard.
func (c *Conn) forget() {
	c.once.Do(func() {
		g := c.g
		c.forgetAnswers()
		g.mu.Lock()
		g.charge(c, -c.unfinished)
		delete(g.conns, c)
		switch c.counted {
		case countedSignalled:
			g.inSignalled--
		case countedPlain:
			g.inPlain--
		}
		c.counted = 0
		c.reqs, c.gone = nil, true
		c.nreqs.Store(0)
		g.mu.Unlock()
		c.partialSince.Store(0)
	})
}

// readFirst reads until the first frame is whole, checks it, and keeps it
// for the first Read.
func (c *Conn) readFirst() error {
	for {
		f, err := c.next()
		if err != nil {
			return err
		}
		if f != nil {
			c.out, err = c.handle(f)
			return err
		}
		if err := c.fill(); err != nil {
			return err
		}
	}
}

// NetConn returns the connection c reads and writes: the socket, or the
// TLS connection over it. A handler finds its connection's TLS state
// through it.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// SyscallConn returns the socket's raw connection: tchannel-go sets socket
// options through it, and logs an error for a connection without it.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("tchconn: the connection has no syscall.RawConn")
}

// firstByte returns b's first byte, or 0 if it is empty.
func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
