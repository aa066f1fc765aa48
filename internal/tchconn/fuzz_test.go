package tchconn

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

// noCheck runs FuzzFrames against a plain tchannel-go server and client,
// without the checks: its seeds then crash the test process, which shows
// what the checks prevent.
var noCheck = flag.Bool("tchconn.nocheck", false, "fuzz plain tchannel-go, without the frame checks (the seeds crash it)")

// FuzzFrames sends each input, as the bytes that follow a handshake, to a
// live tchannel-go server behind a Guard, then checks the server still
// answers a call; and it answers a live tchannel-go client's call with the
// same bytes (each frame's id set to the call's), through a Guard, then
// checks the call returned. Nothing may crash the process or hang.
//
//	go test -run '^$' -fuzz '^FuzzFrames$' -fuzztime 5m ./internal/tchconn
//	go test -run '^FuzzFrames$' ./internal/tchconn -tchconn.nocheck   # the seeds crash plain tchannel-go
func FuzzFrames(f *testing.F) {
	for _, s := range seedStreams() {
		f.Add(s)
	}
	env := startFuzzEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		env.toServer(t, data)
		env.toClient(t, data)
		env.checkFrames(t)
	})
}

// seedStreams are the probe's malformed frames, the two frames that crash
// plain tchannel-go, and valid traffic for the fuzzer to start from. Ids
// are 2, a fresh client connection's first call.
func seedStreams() [][]byte {
	args := [][]byte{[]byte("echo"), []byte("h"), []byte("body")}
	call := func(c tframe.Call) []byte {
		if c.Service == "" {
			c.Service = "s"
		}
		c.TTL = 1000
		c.Headers = [][2]string{{"as", "raw"}, {"cn", "fuzz"}}
		return tframe.AppendCallReq(nil, 2, c)
	}
	cat := func(frames ...[]byte) []byte {
		var b []byte
		for _, f := range frames {
			b = append(b, f...)
		}
		return b
	}
	withSize := func(f []byte, size uint16) []byte {
		f = append([]byte(nil), f...)
		binary.BigEndian.PutUint16(f, size)
		return f
	}
	ok := call(tframe.Call{Fragment: tframe.Fragment{Chunks: args}})
	res := tframe.AppendCallRes(nil, 2, tframe.Call{Fragment: tframe.Fragment{Chunks: [][]byte{nil, []byte("h"), []byte("body")}}})
	return [][]byte{
		// The crashes.
		call(tframe.Call{Fragment: tframe.Fragment{ChecksumType: 4, Chunks: args}}),
		call(tframe.Call{}),
		tframe.AppendCallRes(nil, 2, tframe.Call{Fragment: tframe.Fragment{ChecksumType: 4, Chunks: [][]byte{nil, nil, nil}}}),
		tframe.AppendCallRes(nil, 2, tframe.Call{}),
		cat(call(tframe.Call{Fragment: tframe.Fragment{More: true, Chunks: args}}), tframe.AppendContinue(nil, tframe.CallReqContinue, 2, tframe.Fragment{})),
		// Valid traffic.
		ok,
		res,
		cat(call(tframe.Call{Fragment: tframe.Fragment{More: true, Chunks: args}}), tframe.AppendContinue(nil, tframe.CallReqContinue, 2, tframe.Fragment{Chunks: [][]byte{[]byte("more")}})),
		cat(tframe.AppendCallRes(nil, 2, tframe.Call{Fragment: tframe.Fragment{More: true, Chunks: [][]byte{nil, nil, []byte("a")}}}),
			tframe.AppendContinue(nil, tframe.CallResContinue, 2, tframe.Fragment{Chunks: [][]byte{[]byte("b")}})),
		call(tframe.Call{Fragment: tframe.Fragment{ChecksumType: tframe.ChecksumCRC32, Checksum: make([]byte, 4), Chunks: args}}),
		cat(tframe.Append(nil, tframe.PingReq, 3, nil), tframe.Append(nil, tframe.PingRes, 4, nil)),
		tframe.AppendCancel(nil, 2, "cancelled"),
		tframe.AppendError(nil, 2, 0x03, "busy"),
		// The probe's malformed cases.
		tframe.Append(nil, 0x42, 2, nil),                                          // unknown type
		tframe.AppendSignal(nil, tframe.ConnID, [][2]string{{"drain", "server"}}), // a signal, unannounced
		tframe.Append(nil, tframe.Claim, 2, make([]byte, 29)),                     // claim
		withSize(ok, 10),                  // size below a header
		withSize(ok, uint16(len(ok)+100)), // size past the bytes sent
		ok[:len(ok)-3],                    // cut short
		tframe.AppendInit(nil, tframe.InitReq, 2, tframe.Init{Version: 2}), // a second init
		tframe.AppendInit(nil, tframe.InitRes, 2, tframe.Init{Version: 2}),
		tframe.AppendContinue(nil, tframe.CallReqContinue, 9, tframe.Fragment{Chunks: [][]byte{[]byte("x")}}), // continuation of nothing
		tframe.AppendError(nil, 77, 0xFF, "protocol"),                                                         // error for an unknown id
		tframe.AppendCancel(nil, 77, "nothing"),                                                               // cancel for an unknown id
		call(tframe.Call{Fragment: tframe.Fragment{ChecksumType: tframe.ChecksumCRC32, Checksum: []byte{1}, Chunks: args}}),
		withSize(call(tframe.Call{Service: "s"})[:tframe.HeaderSize+31], tframe.HeaderSize+31),       // service cut
		withSize(append(call(tframe.Call{})[:tframe.HeaderSize+30], 0, 255), tframe.HeaderSize+32),   // 255 headers announced, none sent
		call(tframe.Call{Headers: nil, Fragment: tframe.Fragment{Chunks: [][]byte{[]byte("echo")}}}), // arg1 only
		call(tframe.Call{Fragment: tframe.Fragment{Chunks: append(args, []byte("arg4"), []byte("arg5"))}}),
		call(tframe.Call{Service: strings.Repeat("s", 255), Fragment: tframe.Fragment{Chunks: args}}),
		cat(ok, ok), // a duplicate id
		call(tframe.Call{Fragment: tframe.Fragment{More: true, Chunks: args[:1]}}), // arg1 alone, more to follow, then the close
		call(tframe.Call{Fragment: tframe.Fragment{Chunks: [][]byte{make([]byte, 60_000)}}}),
		withSize(tframe.AppendError(nil, 2, 3, "busy"), 20), // error message cut
		tframe.Append(nil, tframe.Cancel, 2, []byte{1, 2}),  // cancel cut
		{0, 0, 0, 0}, // size 0
		{0xFF, 0xFF}, // size 65535, nothing after
	}
}

// fuzzEnv is the live peers FuzzFrames talks to.
type fuzzEnv struct {
	server  *tchannel.Channel // tchannel-go behind a Guard (or not)
	checker *tchannel.Channel // a plain client that checks the server
	hostile net.Listener      // answers client's calls with the input
	client  *tchannel.Channel // tchannel-go through a Guard (or not)
	g       *Guard
	// frames is the server's and the client's frame pool, which notes a
	// frame tchannel-go releases twice: two connections would later share
	// its buffer, a fault that shows rarely and far from its cause.
	frames *checkedFrames

	mu   sync.Mutex
	data []byte // the input the hostile listener answers with
	wg   sync.WaitGroup
}

func startFuzzEnv(f *testing.F) *fuzzEnv {
	g, err := New(Config{Limits: Limits{StallTimeout: time.Second}})
	if err != nil {
		f.Fatal(err)
	}
	e := &fuzzEnv{g: g, frames: newCheckedFrames()}
	opts := &tchannel.ChannelOptions{DefaultConnectionOptions: tchannel.ConnectionOptions{
		FramePool: e.frames, PropagateCancel: true, SendCancelOnContextCanceled: true}}
	if e.server, err = tchannel.NewChannel("s", opts); err != nil {
		f.Fatal(err)
	}
	e.server.Register(raw.Wrap(echo{}), "echo")
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	var l net.Listener = inner
	if !*noCheck {
		l = &gatedListener{Listener: inner, g: g}
	}
	if err := e.server.Serve(l); err != nil {
		f.Fatal(err)
	}
	if e.checker, err = tchannel.NewChannel("checker", nil); err != nil {
		f.Fatal(err)
	}
	clientOpts := *opts
	if !*noCheck {
		clientOpts.Dialer = func(ctx context.Context, network, hp string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, hp)
			if err != nil {
				return nil, err
			}
			return g.Client(nc), nil
		}
	}
	if e.client, err = tchannel.NewChannel("c", &clientOpts); err != nil {
		f.Fatal(err)
	}
	if e.hostile, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		f.Fatal(err)
	}
	e.wg.Add(1)
	go e.serveHostile()
	f.Cleanup(func() {
		e.hostile.Close()
		e.client.Close()
		e.checker.Close()
		e.server.Close()
		e.wg.Wait()
		<-e.client.ClosedChan()
		<-e.server.ClosedChan()
		g.Close()
	})
	return e
}

// gatedListener gates each connection through the Guard (a listener
// simpler than connlimit's, which the fuzzer does not need).
type gatedListener struct {
	net.Listener
	g *Guard
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		c, err := l.g.Gate(nc, nil)
		if err != nil {
			nc.Close()
			continue
		}
		nc.SetReadDeadline(time.Time{})
		return c, nil
	}
}

// toServer sends data after a handshake, half-closes, reads until the
// server closes, and checks the server still answers a call.
func (e *fuzzEnv) toServer(t *testing.T, data []byte) {
	p := tpeer.Dial(t, e.server.PeerInfo().HostPort)
	p.Handshake()
	if _, err := p.Write(data); err != nil && !isConnGone(err) {
		t.Fatalf("write: %v", err)
	}
	p.Conn.(*net.TCPConn).CloseWrite()
	p.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, p.Conn); err != nil && !isConnGone(err) {
		t.Fatalf("the server did not close the connection after its peer's EOF: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, _, err := raw.Call(ctx, e.checker, e.server.PeerInfo().HostPort, "s", "echo", nil, []byte("alive")); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
}

// checkFrames fails if tchannel-go released a frame twice since the last
// check. Its exchanges on the input's connections have ended (toServer
// read until the close, toClient's call returned), but a release can still
// come from a goroutine winding down: it is then blamed on a later input,
// and the corpus entry written names the wrong one.
func (e *fuzzEnv) checkFrames(t *testing.T) {
	if bad := e.frames.takeBad(); len(bad) > 0 {
		t.Fatalf("tchannel-go released a frame twice (%d times); the first:\n%s", len(bad), bad[0])
	}
}

// toClient makes a call the hostile listener answers with data.
func (e *fuzzEnv) toClient(t *testing.T, data []byte) {
	e.mu.Lock()
	e.data = data
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, _, _ = raw.Call(ctx, e.client, e.hostile.Addr().String(), "s", "echo", nil, []byte("x"))
	if ctx.Err() != nil {
		t.Fatal("the client's call to the hostile server did not return")
	}
}

// serveHostile answers each connection's handshake, then its first call
// request with the current input, ids set to the call's, and closes it.
func (e *fuzzEnv) serveHostile() {
	defer e.wg.Done()
	for {
		c, err := e.hostile.Accept()
		if err != nil {
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for {
				f, err := tpeer.ReadFrame(c)
				if err != nil {
					return
				}
				switch f.Type {
				case tframe.InitReq:
					c.Write(tframe.AppendInit(nil, tframe.InitRes, f.ID, tframe.Init{Version: 2, Params: tframe.InitParams(e.hostile.Addr().String(), "hostile")}))
				case tframe.CallReq:
					e.mu.Lock()
					data := withID(e.data, f.ID)
					e.mu.Unlock()
					c.Write(data)
					return
				}
			}
		}()
	}
}

// withID returns a copy of stream with the id of each frame it can find
// (by their size fields) set to id.
func withID(stream []byte, id uint32) []byte {
	out := append([]byte(nil), stream...)
	for b := out; len(b) >= tframe.HeaderSize; {
		size := int(binary.BigEndian.Uint16(b))
		binary.BigEndian.PutUint32(b[4:], id)
		if size < tframe.HeaderSize || size > len(b) {
			break
		}
		b = b[size:]
	}
	return out
}

func isConnGone(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && !ne.Timeout()
}
