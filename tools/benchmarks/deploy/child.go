package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/discovery"
)

// ChildEnv is the environment variable that makes ServeChildIfAsked turn
// the process into a fleet server. Run sets it, to the server's job in
// JSON, only in the environment of the children it starts.
const ChildEnv = "SLUICE_DEPLOY_CHILD"

// Service and Method are what every fleet server serves and every client
// calls: a raw echo.
const (
	Service = "kv"
	Method  = "echo"
)

// Bounds on a child server's life.
const (
	// listenLimit bounds a child's attempts to listen on a port that the
	// server it replaces has just left.
	listenLimit = 5 * time.Second
	// registerLimit bounds the wait for a child's registration to be
	// written.
	registerLimit = 20 * time.Second
	// shutdownSlack is how much longer than the grace a child's Shutdown
	// may take (handlers in flight, the registry) before it gives up.
	shutdownSlack = 15 * time.Second
)

// Kinds of child server (job.Server).
const (
	serverSluice   = "sluice"
	serverTChannel = "tchannel"
)

// job is what a child server does.
type job struct {
	// Server is serverSluice or serverTChannel.
	Server string `json:"server"`
	// Listen is the address to serve on: 127.0.0.1:0 for a new port.
	Listen string `json:"listen"`
	// ServiceTime is how long each request takes.
	ServiceTime time.Duration `json:"service_time"`
	// Etcd and Prefix, when Etcd is set, have a Sluice server register
	// under Prefix in the etcd at the client URL Etcd.
	Etcd   string `json:"etcd,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Grace and Quiet are a Sluice server's ShutdownConfig.
	Grace time.Duration `json:"grace,omitempty"`
	Quiet time.Duration `json:"quiet,omitempty"`
}

// The lines a child writes on its standard output. Times are Unix
// nanoseconds on the child's clock.
const (
	lineListening  = "listening"  // HOST:PORT TIME: it serves, once, first
	lineRegistered = "registered" // TIME: its registration was written (etcd)
	lineFirst      = "first"      // TIME: its first request reached the handler
	lineDone       = "done"       // TIME HANDLED [ERROR]: it shut down or closed, and exits
	lineError      = "error"      // MESSAGE: it could not serve, and exits
)

// The commands a child reads on its standard input. Its input ending
// counts as cmdClose.
const (
	cmdShutdown = "shutdown" // leave with Channel.Shutdown
	cmdClose    = "close"    // leave with Close
)

// ServeChildIfAsked makes this process a fleet server when the
// environment variable ChildEnv holds a job, and then never returns;
// otherwise it returns at once and does nothing.
//
// Run starts its servers by re-executing the current binary
// (os.Executable) with ChildEnv set, so any binary that runs the
// benchmark must call ServeChildIfAsked first thing: `sluice-lab` in main, a
// test binary in TestMain. Run reports a child that exits without serving
// as a missing hook.
func ServeChildIfAsked() {
	v := os.Getenv(ChildEnv)
	if v == "" {
		return
	}
	os.Exit(serveChild(v, os.Stdin, os.Stdout))
}

// serveChild serves the job in spec until stdin asks it to leave, or ends,
// and returns the exit code.
func serveChild(spec string, stdin io.Reader, stdout io.Writer) int {
	out := &lineWriter{w: stdout}
	fail := func(err error) int {
		out.line(lineError, err.Error())
		return 1
	}
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		return fail(fmt.Errorf("%s: %w", ChildEnv, err))
	}
	srv, err := newChildServer(j, out)
	if err != nil {
		return fail(err)
	}
	ln, err := listenRetrying(j.Listen, listenLimit)
	if err != nil {
		srv.close()
		return fail(err)
	}
	if err := srv.serve(ln); err != nil {
		ln.Close()
		srv.close()
		return fail(err)
	}
	out.line(lineListening, ln.Addr().String(), stamp(time.Now()))
	srv.afterListen()

	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if sc.Text() == cmdShutdown {
			err := srv.shutdown(j.Grace + shutdownSlack)
			srv.close()
			out.done(srv.handled.Load(), err)
			return 0
		}
		if sc.Text() == cmdClose {
			break
		}
	}
	srv.close()
	out.done(srv.handled.Load(), nil)
	return 0
}

// childServer is a child's server, Sluice or plain tchannel-go.
type childServer struct {
	j       job
	out     *lineWriter
	handled atomic.Int64

	ch   *channel.Channel  // a Sluice server
	tch  *tchannel.Channel // a plain one
	regs chan discovery.Registration
	// stopReg stops the registration's watch and the etcd client.
	stopReg  func()
	watching sync.WaitGroup
}

func newChildServer(j job, out *lineWriter) (*childServer, error) {
	s := &childServer{j: j, out: out, stopReg: func() {}}
	switch j.Server {
	case serverSluice:
		opts := []channel.Option{channel.WithShutdown(channel.ShutdownConfig{Grace: j.Grace, Quiet: j.Quiet})}
		if j.Etcd != "" {
			reg, stop, err := newEtcdRegistrar(j.Etcd, j.Prefix)
			if err != nil {
				return nil, err
			}
			s.stopReg = stop
			s.regs = make(chan discovery.Registration, 1)
			opts = append(opts, channel.WithRegistrar(watchedRegistrar{Registrar: reg, regs: s.regs}))
		}
		ch, err := channel.New(Service, opts...)
		if err != nil {
			s.stopReg()
			return nil, err
		}
		s.ch = ch
		if err := ch.RegisterRaw(Method, func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			s.handle(ctx)
			return &channel.RawResponse{Arg3: req.Arg3}, nil
		}); err != nil {
			s.close()
			return nil, err
		}
	case serverTChannel:
		tch, err := tchannel.NewChannel(Service, &tchannel.ChannelOptions{Logger: tchannel.NullLogger})
		if err != nil {
			return nil, err
		}
		s.tch = tch
		tch.Register(raw.Wrap(echoHandler{s}), Method)
	default:
		return nil, fmt.Errorf("job.Server is %q, want %s or %s", j.Server, serverSluice, serverTChannel)
	}
	return s, nil
}

// handle waits out one request's service time (or until its caller gives
// up), reporting the first request.
func (s *childServer) handle(ctx context.Context) {
	if s.handled.Add(1) == 1 {
		s.out.line(lineFirst, stamp(time.Now()))
	}
	if s.j.ServiceTime <= 0 {
		return
	}
	t := time.NewTimer(s.j.ServiceTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// echoHandler is the plain tchannel-go server's raw handler.
type echoHandler struct{ s *childServer }

func (h echoHandler) Handle(ctx context.Context, args *raw.Args) (*raw.Res, error) {
	h.s.handle(ctx)
	return &raw.Res{Arg3: args.Arg3}, nil
}

func (echoHandler) OnError(context.Context, error) {}

func (s *childServer) serve(ln net.Listener) error {
	if s.ch != nil {
		return s.ch.Serve(ln)
	}
	return s.tch.Serve(ln)
}

// afterListen reports, for a registering server, when its registration
// is written, from a goroutine of its own.
func (s *childServer) afterListen() {
	if s.regs == nil {
		return
	}
	var reg discovery.Registration
	select {
	case reg = <-s.regs:
	default:
		s.out.line(lineError, "the channel listened without registering")
		return
	}
	stop := make(chan struct{})
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		deadline := time.Now().Add(registerLimit)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for !reg.State().Registered {
			if time.Now().After(deadline) {
				s.out.line(lineError, fmt.Sprintf("the registration was not written within %v: %s", registerLimit, reg.State().LastError))
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
		s.out.line(lineRegistered, stamp(time.Now()))
	}()
	stopEtcd := s.stopReg
	s.stopReg = func() {
		close(stop)
		s.watching.Wait()
		stopEtcd()
	}
}

// shutdown has a Sluice server leave with Shutdown, within limit; a plain
// one has no Shutdown and closes.
func (s *childServer) shutdown(limit time.Duration) error {
	if s.ch == nil {
		return errors.New("a plain tchannel-go server has no Shutdown")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return s.ch.Shutdown(ctx)
}

// closeWait bounds the wait for a plain tchannel-go server's connections
// to close after Close (a Sluice Channel bounds its own).
const closeWait = 5 * time.Second

// close closes the server (and waits, within bounds, for its connections
// to close) and stops its registration's client.
func (s *childServer) close() {
	if s.ch != nil {
		s.ch.Close()
	}
	if s.tch != nil {
		s.tch.Close()
		t := time.NewTimer(closeWait)
		select {
		case <-s.tch.ClosedChan():
		case <-t.C:
		}
		t.Stop()
	}
	s.stopReg()
	s.stopReg = func() {}
}

// watchedRegistrar hands each Registration it makes to regs, for the
// child to see when it is written.
type watchedRegistrar struct {
	discovery.Registrar
	regs chan<- discovery.Registration
}

func (w watchedRegistrar) Register(hostPort string) (discovery.Registration, error) {
	r, err := w.Registrar.Register(hostPort)
	if err == nil {
		select {
		case w.regs <- r:
		default: // one is enough
		}
	}
	return r, err
}

// listenRetrying listens on addr, trying again for up to limit while the
// address is in use (the server being replaced in place is still leaving).
func listenRetrying(addr string, limit time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(limit)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("listen on %s for %v: %w", addr, limit, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stamp formats t for a line: Unix nanoseconds.
func stamp(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// lineWriter writes whole lines from concurrent goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(fields ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, f := range fields {
		if i > 0 {
			io.WriteString(l.w, " ")
		}
		io.WriteString(l.w, strings.ReplaceAll(f, "\n", "; "))
	}
	io.WriteString(l.w, "\n")
}

func (l *lineWriter) done(handled int64, err error) {
	fields := []string{lineDone, stamp(time.Now()), strconv.FormatInt(handled, 10)}
	if err != nil {
		fields = append(fields, err.Error())
	}
	l.line(fields...)
}
