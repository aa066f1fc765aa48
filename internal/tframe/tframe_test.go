package tframe

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"
)

func call(c Call) []byte { return AppendCallReq(nil, 7, c) }

var okArgs = Fragment{Chunks: [][]byte{[]byte("method"), nil, []byte("body")}}

func TestParse(t *testing.T) {
	valid := []struct {
		name  string
		frame []byte
		want  Frame
	}{
		{"init req", AppendInit(nil, InitReq, 1, Init{Version: 2, Params: InitParams("127.0.0.1:1", "p")}), Frame{Header: Header{Type: InitReq, ID: 1}}},
		{"init with trailing bytes", Append(nil, InitRes, 1, []byte{0, 2, 0, 0, 9}), Frame{Header: Header{Type: InitRes, ID: 1}}},
		{"call req", call(Call{TTL: 1000, Service: "kv", Headers: [][2]string{{"as", "raw"}, {"cn", "c"}}, Fragment: okArgs}),
			Frame{Header: Header{Type: CallReq, ID: 7}, TTL: 1000}},
		{"call req, more fragments, crc32", call(Call{Fragment: Fragment{More: true, ChecksumType: ChecksumCRC32, Checksum: []byte{1, 2, 3, 4}, Chunks: [][]byte{nil, nil}}}),
			Frame{Header: Header{Type: CallReq, ID: 7}, More: true}},
		{"call res, more fragments, one chunk", AppendCallRes(nil, 9, Call{Fragment: Fragment{More: true, Chunks: [][]byte{nil}}}),
			Frame{Header: Header{Type: CallRes, ID: 9}, More: true}},
		{"call res", AppendCallRes(nil, 9, Call{Code: 1, Fragment: okArgs}), Frame{Header: Header{Type: CallRes, ID: 9}}},
		{"continue, one empty chunk", AppendContinue(nil, CallReqContinue, 3, Fragment{Chunks: [][]byte{nil}}), Frame{Header: Header{Type: CallReqContinue, ID: 3}}},
		{"res continue", AppendContinue(nil, CallResContinue, 3, Fragment{More: true, ChecksumType: ChecksumCRC32C, Checksum: make([]byte, 4), Chunks: [][]byte{{1}}}),
			Frame{Header: Header{Type: CallResContinue, ID: 3}, More: true}},
		{"cancel", AppendCancel(nil, 4, "gone"), Frame{Header: Header{Type: Cancel, ID: 4}}},
		{"error", AppendError(nil, 5, 0x03, "busy"), Frame{Header: Header{Type: Error, ID: 5}}},
		{"ping", Append(nil, PingReq, 6, nil), Frame{Header: Header{Type: PingReq, ID: 6}}},
		{"ping with a payload", Append(nil, PingRes, 6, []byte{1, 2}), Frame{Header: Header{Type: PingRes, ID: 6}}},
		{"signal", AppendSignal(nil, ConnID, [][2]string{{"drain", "server"}, {"k", ""}}), Frame{Header: Header{Type: Signal, ID: ConnID}}},
		{"signal without pairs", AppendSignal(nil, 8, nil), Frame{Header: Header{Type: Signal, ID: 8}}},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.frame)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.want.Size = uint16(len(tc.frame))
			if got != tc.want {
				t.Errorf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}

	withSize := func(f []byte, size uint16) []byte {
		f = append([]byte(nil), f...)
		f[0], f[1] = byte(size>>8), byte(size)
		return f
	}
	cut := func(f []byte, n int) []byte { return withSize(f[:len(f)-n], uint16(len(f)-n)) }
	invalid := []struct {
		name, reason string
		frame        []byte
	}{
		{"shorter than a header", "shorter than a frame header", make([]byte, 15)},
		{"size field too small", "size field is 10", withSize(Append(nil, PingReq, 1, nil), 10)},
		{"size field too large", "size field is 17", withSize(Append(nil, PingReq, 1, nil), 17)},
		{"unknown type", "unknown frame type", Append(nil, 0x42, 1, nil)},
		{"claim", "not supported", Append(nil, Claim, 1, make([]byte, 29))},
		{"signal without a count", "needs 1 bytes", Append(nil, Signal, 1, nil)},
		{"signal cut", "a string needs 5 bytes", Append(nil, Signal, 1, []byte{1, 5, 'd'})},
		{"signal with trailing bytes", "1 bytes after the last pair", Append(nil, Signal, 1, []byte{0, 7})},
		{"checksum type 4 (the probe's crash)", "checksum type is 4", call(Call{Fragment: Fragment{ChecksumType: 4, Chunks: okArgs.Chunks}})},
		{"checksum type 255", "checksum type is 255", AppendCallRes(nil, 1, Call{Fragment: Fragment{ChecksumType: 255, Chunks: okArgs.Chunks}})},
		{"call req without chunks", "no argument chunk", call(Call{})},
		// tchannel-go releases the frame twice if arg1 could go on and the
		// next fragment does not come (see FuzzFrames).
		{"call req, more fragments, arg1 alone", "carries only arg1's chunk", call(Call{Fragment: Fragment{More: true, Chunks: [][]byte{[]byte("method")}}})},
		{"continue without chunks", "no argument chunk", AppendContinue(nil, CallReqContinue, 1, Fragment{})},
		{"res continue without chunks", "no argument chunk", AppendContinue(nil, CallResContinue, 1, Fragment{ChecksumType: ChecksumCRC32, Checksum: make([]byte, 4)})},
		{"checksum cut", "needs 4 bytes", call(Call{Fragment: Fragment{ChecksumType: ChecksumCRC32, Checksum: []byte{1, 2}}})},
		{"chunk longer than the payload", "an argument chunk needs", cut(call(Call{Fragment: okArgs}), 1)},
		{"half a chunk length", "a 2-byte field", withSize(append(call(Call{Fragment: okArgs}), 0), uint16(len(call(Call{Fragment: okArgs}))+1))},
		{"service cut", "a string needs", withSize(call(Call{Service: "kv"})[:HeaderSize+31], HeaderSize+31)},
		{"header count past the end", "needs", withSize(append(call(Call{})[:HeaderSize+30], 0, 200), HeaderSize+32)},
		{"init param cut", "a string needs", cut(AppendInit(nil, InitReq, 1, Init{Params: [][2]string{{"k", "v"}}}), 1)},
		{"init params count past the end", "needs", withSize(append(AppendInit(nil, InitReq, 1, Init{})[:HeaderSize+2], 0, 9), HeaderSize+4)},
		{"error message cut", "a string needs", cut(AppendError(nil, 1, 3, "busy"), 1)},
		{"cancel cut", "needs", withSize(Append(nil, Cancel, 1, make([]byte, 10)), HeaderSize+10)},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.frame)
			var fe *ProtocolError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, want a *ProtocolError", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Parse error %q does not say %q", err, tc.reason)
			}
		})
	}
}

// TestTChannelFramesParse records every frame a tchannel-go client and
// server exchange (handshake, raw calls of every size up to several
// fragments, an application error, a system error, a ping) and checks
// that Parse accepts each and reads its fragment flag right.
func TestTChannelFramesParse(t *testing.T) {
	server, err := tchannel.NewChannel("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	server.Register(raw.Wrap(echo{}), "echo")
	if err := server.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	client, err := tchannel.NewChannel("c", &tchannel.ChannelOptions{
		Dialer: func(ctx context.Context, network, hostPort string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, hostPort)
			if err != nil {
				return nil, err
			}
			return &recordingConn{Conn: c, rec: &rec}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hp := server.PeerInfo().HostPort
	for _, size := range []int{0, 10, 65000, 200_000} {
		body := make([]byte, size)
		if _, _, _, err := raw.Call(ctx, client, hp, "s", "echo", []byte("h"), body); err != nil {
			t.Fatalf("echo of %d bytes: %v", size, err)
		}
	}
	if _, _, _, err := raw.Call(ctx, client, hp, "s", "fail", nil, nil); err == nil {
		t.Fatal("call of an unregistered method succeeded")
	}
	if err := client.Ping(ctx, hp); err != nil {
		t.Fatal(err)
	}
	client.Close()
	<-client.ClosedChan()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := map[Type]int{}
	more := 0
	for dir, stream := range [][]byte{rec.written, rec.read} {
		for len(stream) > 0 {
			if len(stream) < HeaderSize {
				t.Fatalf("direction %d: %d stray bytes at the end", dir, len(stream))
			}
			size := int(ParseHeader(stream).Size)
			f, err := Parse(stream[:size])
			if err != nil {
				t.Fatalf("direction %d: tchannel-go wrote a frame Parse rejects: %v", dir, err)
			}
			seen[f.Type]++
			if f.More {
				more++
			}
			stream = stream[size:]
		}
	}
	for _, typ := range []Type{InitReq, InitRes, CallReq, CallRes, CallReqContinue, CallResContinue, Error, PingReq, PingRes} {
		if seen[typ] == 0 {
			t.Errorf("no %v frame was exchanged (saw %v)", typ, seen)
		}
	}
	if more == 0 {
		t.Error("no frame said more fragments follow")
	}
}

type echo struct{}

func (echo) Handle(_ context.Context, a *raw.Args) (*raw.Res, error) {
	return &raw.Res{Arg2: a.Arg2, Arg3: a.Arg3}, nil
}
func (echo) OnError(context.Context, error) {}

type recorder struct {
	mu            sync.Mutex
	written, read []byte
}

type recordingConn struct {
	net.Conn
	rec *recorder
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.rec.mu.Lock()
	c.rec.read = append(c.rec.read, b[:n]...)
	c.rec.mu.Unlock()
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.written = append(c.rec.written, b...)
	c.rec.mu.Unlock()
	return c.Conn.Write(b)
}

// FuzzParse checks that Parse never panics, that what it accepts has the
// size it read, and that SignalPairs and InitParamsOf read what it accepts
// without panicking.
func FuzzParse(f *testing.F) {
	f.Add(call(Call{Fragment: okArgs}))
	f.Add(call(Call{Fragment: Fragment{ChecksumType: 4, Chunks: okArgs.Chunks}}))
	f.Add(AppendInit(nil, InitReq, 1, Init{Version: 2, Params: InitParams("h:1", "p")}))
	f.Add(AppendError(nil, 1, 3, "x"))
	f.Add(AppendSignal(nil, ConnID, [][2]string{{"drain", "server"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Parse(b)
		if err != nil {
			return
		}
		if int(fr.Size) != len(b) {
			t.Fatalf("Parse accepted %d bytes with a size field of %d", len(b), fr.Size)
		}
		// What reads an accepted frame's fields cannot run past them.
		switch fr.Type {
		case Signal:
			SignalPairs(b[HeaderSize:], func(k, v []byte) {})
		case InitReq, InitRes:
			InitParamsOf(b)
		}
	})
}

// SignalPairs reads back what AppendSignal wrote, and InitParamsOf what
// AppendInit wrote.
func TestSignalPairsAndInitParams(t *testing.T) {
	kvs := [][2]string{{"drain", "server"}, {"", ""}, {strings.Repeat("k", 255), strings.Repeat("v", 255)}}
	var got [][2]string
	SignalPairs(AppendSignal(nil, ConnID, kvs)[HeaderSize:], func(k, v []byte) { got = append(got, [2]string{string(k), string(v)}) })
	if !slices.Equal(got, kvs) {
		t.Errorf("SignalPairs read %q, want %q", got, kvs)
	}
	params := InitParams("127.0.0.1:1", "p")
	v, ps := InitParamsOf(AppendInit(nil, InitReq, 1, Init{Version: 2, Params: params}))
	if v != 2 || !slices.Equal(ps, params) {
		t.Errorf("InitParamsOf = %d, %q; want 2, %q", v, ps, params)
	}
}
