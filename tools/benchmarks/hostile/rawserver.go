package hostile

import (
	"net"
	"sync"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// rawServer is the common part of the hostile TChannel servers: a
// listener on 127.0.0.1 whose connections are each served by one
// function, and closed, with it, by close.
type rawServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex // conns, and the counters of the servers built on it
	conns []net.Conn
}

// listenRaw listens on a free port of 127.0.0.1; start serves it.
func listenRaw() (*rawServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &rawServer{ln: ln}, nil
}

// start accepts connections, each served by serve on its own goroutine,
// until close.
func (s *rawServer) start(serve func(net.Conn)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				serve(c)
			}()
		}
	}()
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

// handshakeReply is the answer to an init request or a ping (h), as a
// TChannel server gives it, or nil for any other frame.
func (s *rawServer) handshakeReply(h tframe.Header) []byte {
	switch h.Type {
	case tframe.InitReq:
		return tframe.AppendInit(nil, tframe.InitRes, h.ID, tframe.Init{Version: 2, Params: tframe.InitParams(s.addr(), "hostile-server")})
	case tframe.PingReq:
		return tframe.Append(nil, tframe.PingRes, h.ID, nil)
	}
	return nil
}

// close stops accepting, closes every connection and waits for their
// serving to end.
func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
