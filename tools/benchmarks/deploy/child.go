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
	"sync/atomic"
	"time"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// ChildEnv makes ServeChildIfAsked turn the process into a fleet server:
// Run sets it, to the server's job in JSON, in its children's environment.
const ChildEnv = "SLUICE_DEPLOY_CHILD"

// Service and Method are what every fleet server serves and every client
// calls: a raw echo.
const (
	Service = "kv"
	Method  = "echo"
)

// Bounds on a child server's life.
const (
	// listenLimit bounds the attempts to listen on a port that the server
	// being replaced has just left.
	listenLimit = 5 * time.Second
	// registerLimit bounds the wait for a registration to be written.
	registerLimit = 20 * time.Second
	// shutdownSlack is how much longer than the grace a Shutdown may take.
	shutdownSlack = 15 * time.Second
	// closeWait bounds a plain tchannel-go server's Close.
	closeWait = 5 * time.Second
)

// Kinds of child server (job.Server).
const (
	serverSluice   = "sluice"
	serverTChannel = "tchannel"
)

// job is what a child server does.
type job struct {
	Server      string        `json:"server"` // serverSluice or serverTChannel
	Listen      string        `json:"listen"` // 127.0.0.1:0 for a new port
	ServiceTime time.Duration `json:"service_time"`
	// Etcd, when set, has a Sluice server register under Prefix in the
	// etcd at that client URL.
	Etcd   string `json:"etcd,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Grace and Quiet are a Sluice server's ShutdownConfig.
	Grace time.Duration `json:"grace,omitempty"`
	Quiet time.Duration `json:"quiet,omitempty"`
}

// The lines a child writes besides fleet.Listening ("listening HOST:PORT
// TIME") and fleet.Error; times are Unix nanoseconds on its clock.
const (
	lineListening  = fleet.Listening
	lineError      = fleet.Error
	lineRegistered = "registered" // TIME: its registration was written (etcd)
	lineFirst      = "first"      // TIME: its first request reached the handler
	lineDone       = "done"       // TIME HANDLED [ERROR]: it left, and exits
)

// The commands a child reads on its stdin; its input ending counts as
// cmdClose.
const (
	cmdShutdown = "shutdown" // leave with Channel.Shutdown
	cmdClose    = "close"    // leave with Close
)

// ServeChildIfAsked makes this process a fleet server when ChildEnv holds
// a job, and then never returns; otherwise it returns at once. Run starts
// its servers by re-executing this binary, so a binary that runs the
// benchmark calls it first thing: `sluice-lab` in main, a test binary in
// TestMain.
func ServeChildIfAsked() {
	if v := os.Getenv(ChildEnv); v != "" {
		os.Exit(serveChild(v, os.Stdin, os.Stdout))
	}
}

// serveChild serves the job in spec until stdin asks it to leave, or
// ends, and returns the exit code.
func serveChild(spec string, stdin io.Reader, stdout io.Writer) int {
	out := &fleet.Lines{W: stdout}
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		return out.Fail(fmt.Errorf("%s: %w", ChildEnv, err))
	}
	s := &childServer{j: j, out: out, stopReg: func() {}}
	if err := s.start(); err != nil {
		s.close()
		return out.Fail(err)
	}
	out.Line(lineListening, s.addr, stamp(time.Now()))
	s.awaitRegistration()
	var err error
	sc := bufio.NewScanner(stdin)
	for sc.Scan() && sc.Text() != cmdClose {
		if sc.Text() == cmdShutdown {
			err = s.shutdown()
			break
		}
	}
	s.close()
	done := []string{lineDone, stamp(time.Now()), strconv.FormatInt(s.handled.Load(), 10)}
	if err != nil {
		done = append(done, err.Error())
	}
	out.Line(done...)
	return 0
}

// childServer is a child's server, Sluice or plain tchannel-go.
type childServer struct {
	j       job
	out     *fleet.Lines
	addr    string
	handled atomic.Int64

	ch      *channel.Channel  // a Sluice server
	tch     *tchannel.Channel // a plain one
	regs    chan discovery.Registration
	stopReg func() // closes the registrar's etcd client
}

// start makes the server and has it serve on j.Listen.
func (s *childServer) start() error {
	ln, err := listenRetrying(s.j.Listen, listenLimit)
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	switch s.j.Server {
	case serverSluice:
		opts := []channel.Option{channel.WithShutdown(channel.ShutdownConfig{Grace: s.j.Grace, Quiet: s.j.Quiet})}
		if s.j.Etcd != "" {
			reg, stop, err := newEtcdRegistrar(s.j.Etcd, s.j.Prefix)
			if err != nil {
				ln.Close()
				return err
			}
			s.stopReg, s.regs = stop, make(chan discovery.Registration, 1)
			opts = append(opts, channel.WithRegistrar(watchedRegistrar{Registrar: reg, regs: s.regs}))
		}
		if s.ch, err = channel.New(Service, opts...); err == nil {
			err = s.ch.RegisterRaw(Method, func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
				s.handle(ctx)
				return &channel.RawResponse{Arg3: req.Arg3}, nil
			})
		}
		if err == nil {
			err = s.ch.Serve(ln)
		}
		if err != nil {
			ln.Close()
		}
		return err
	case serverTChannel:
		if s.tch, err = tchannel.NewChannel(Service, &tchannel.ChannelOptions{Logger: tchannel.NullLogger}); err != nil {
			ln.Close()
			return err
		}
		s.tch.Register(raw.Wrap(echoHandler{s}), Method)
		return s.tch.Serve(ln)
	}
	ln.Close()
	return fmt.Errorf("job.Server is %q, want %s or %s", s.j.Server, serverSluice, serverTChannel)
}

// handle waits out one request's service time (or until its caller gives
// up), reporting the first request.
func (s *childServer) handle(ctx context.Context) {
	if s.handled.Add(1) == 1 {
		s.out.Line(lineFirst, stamp(time.Now()))
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

// awaitRegistration reports, for a registering server, when its
// registration is written, polling its state.
func (s *childServer) awaitRegistration() {
	if s.regs == nil {
		return
	}
	select {
	case reg := <-s.regs:
		deadline := time.Now().Add(registerLimit)
		for !reg.State().Registered {
			if time.Now().After(deadline) {
				s.out.Line(lineError, fmt.Sprintf("the registration was not written within %v: %s", registerLimit, reg.State().LastError))
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
		s.out.Line(lineRegistered, stamp(time.Now()))
	default:
		s.out.Line(lineError, "the channel listened without registering")
	}
}

// shutdown has a Sluice server leave with Shutdown; a plain one has none.
func (s *childServer) shutdown() error {
	if s.ch == nil {
		return errors.New("a plain tchannel-go server has no Shutdown")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.j.Grace+shutdownSlack)
	defer cancel()
	return s.ch.Shutdown(ctx)
}

// close closes the server, waiting within bounds for its connections to
// close, and stops its registration's client.
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

// watchedRegistrar hands the first Registration it makes to regs.
type watchedRegistrar struct {
	discovery.Registrar
	regs chan<- discovery.Registration
}

func (w watchedRegistrar) Register(hostPort string) (discovery.Registration, error) {
	r, err := w.Registrar.Register(hostPort)
	if err == nil {
		select {
		case w.regs <- r:
		default:
		}
	}
	return r, err
}

// listenRetrying listens on addr, trying again for up to limit while the
// address is in use (the server replaced in place is still leaving).
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
