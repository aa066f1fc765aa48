package tlsfiles_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// handshake is the outcome of one handshake on a test server.
type handshake struct {
	state tls.ConnectionState
	err   error
}

// server is a TLS echo server on 127.0.0.1.
type server struct {
	addr string
	// handshakes receives the outcome of each handshake, in the order
	// they end (outcomes beyond its buffer are dropped).
	handshakes chan handshake
}

// serve accepts TLS connections on 127.0.0.1 with cfg until the test
// ends. A connection whose handshake succeeds echoes what it reads.
func serve(t *testing.T, cfg *tls.Config) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: lis.Addr().String(), handshakes: make(chan handshake, 1000)}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = true
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(testwait.Limit))
				tc := tls.Server(c, cfg)
				err := tc.Handshake()
				select {
				case s.handshakes <- handshake{tc.ConnectionState(), err}:
				default:
				}
				if err == nil {
					io.Copy(tc, tc)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// next returns the outcome of the server's next handshake.
func (s *server) next(t *testing.T) handshake {
	t.Helper()
	return testwait.Recv(t, s.handshakes, "the server's handshake")
}

// nextIdentity returns the client's identity in the server's next
// handshake, failing the test if it failed.
func (s *server) nextIdentity(t *testing.T) tlsfiles.Identity {
	t.Helper()
	h := s.next(t)
	if h.err != nil {
		t.Fatalf("the server's handshake: %v", h.err)
	}
	id, _ := tlsfiles.IdentityOf(&h.state)
	return id
}

// dial connects to addr with cfg (tls.Dialer, which takes the server name
// from addr unless cfg has one) and echoes a message, so that a
// certificate the server refuses after a TLS 1.3 client's handshake ended
// is an error here too. The connection closes when the test ends.
func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	c, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := c.(*tls.Conn)
	t.Cleanup(func() { tc.Close() })
	tc.SetDeadline(time.Now().Add(testwait.Limit))
	if err := echo(tc); err != nil {
		return nil, err
	}
	return tc, nil
}

// echo writes a message on c and reads it back.
func echo(c *tls.Conn) error {
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// mustDial is dial failing the test on an error.
func mustDial(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := dial(t, addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return c
}

// serial is the serial number of the certificate c's peer presented.
func serial(c *tls.Conn) *big.Int {
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// presented fails the test unless c's peer presented want.
func presented(t *testing.T, c *tls.Conn, want *x509.Certificate, what string) {
	t.Helper()
	if got := serial(c); got.Cmp(want.SerialNumber) != 0 {
		t.Errorf("%s: the server presented serial %v, want %v (%s)", what, got, want.SerialNumber, want.Subject.CommonName)
	}
}

func newReloader(t *testing.T, c tlsfiles.Config) *tlsfiles.Reloader {
	t.Helper()
	r, err := tlsfiles.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func serverConfig(t *testing.T, r *tlsfiles.Reloader) *tls.Config {
	t.Helper()
	c, err := r.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// errorLog is a slog.Handler collecting the errors of the Warn lines
// logged.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

// logger returns a logger writing to l.
func (l *errorLog) logger() *slog.Logger { return slog.New(l) }

func (l *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *errorLog) WithGroup(string) slog.Handler            { return l }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn {
		return fmt.Errorf("a line at %v, want Warn: %s", r.Level, r.Message)
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
			l.mu.Lock()
			l.errs = append(l.errs, err)
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *errorLog) get() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}
