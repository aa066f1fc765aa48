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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// ChildEnv holds a fleet server's job, in JSON, in its environment.
const ChildEnv = "SLUICE_DEPLOY_CHILD"

// Service and Method are the raw echo every fleet server serves.
const (
	Service = "kv"
	Method  = "echo"
)

// Bounds on a child server's waits: to listen on a port the server it
// replaces has just left, for its registration, for a Shutdown beyond its
// grace, and for a plain tchannel-go server's Close.
const (
	listenLimit   = 5 * time.Second
	registerLimit = 20 * time.Second
	shutdownSlack = 15 * time.Second
	closeWait     = 5 * time.Second
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
	// Etcd, if set, has a Sluice server register under Prefix there.
	Etcd   string `json:"etcd,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Grace and Quiet are a Sluice server's ShutdownConfig.
	Grace time.Duration `json:"grace,omitempty"`
	Quiet time.Duration `json:"quiet,omitempty"`
}

// The lines a child writes besides "listening HOST:PORT TIME" and "error
// WHY"; times are Unix nanoseconds on its clock.
const (
	lineRegistered = "registered" // TIME: its registration was written (etcd)
	lineFirst      = "first"      // TIME: its first request reached the handler
	lineDone       = "done"       // TIME HANDLED [ERROR]: it left, and exits
)

// The commands a child reads on its stdin; its end is cmdClose.
const (
	cmdShutdown = "shutdown" // leave with Channel.Shutdown
	cmdClose    = "close"    // leave with Close
)

// ServeChildIfAsked makes this process a fleet server when ChildEnv holds
// a job, and then never returns; otherwise it returns at once. Run
// re-executes the binary as its servers, so a binary that runs it calls
// this first thing (main, or TestMain).
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
	out.Line(fleet.Listening, s.addr, stamp(time.Now()))
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
	stopReg func()            // closes the registrar's etcd client
}

// start makes the server and has it serve on j.Listen.
func (s *childServer) start() (err error) {
	if s.j.Server != serverSluice && s.j.Server != serverTChannel {
		return fmt.Errorf("job.Server is %q, want %s or %s", s.j.Server, serverSluice, serverTChannel)
	}
	ln, err := listenRetrying(s.j.Listen, listenLimit)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	s.addr = ln.Addr().String()
	if s.j.Server == serverTChannel {
		if s.tch, err = tchannel.NewChannel(Service, &tchannel.ChannelOptions{Logger: tchannel.NullLogger}); err != nil {
			return err
		}
		s.tch.Register(raw.Wrap(s), Method)
		return s.tch.Serve(ln)
	}
	opts := []channel.Option{channel.WithShutdown(channel.ShutdownConfig{Grace: s.j.Grace, Quiet: s.j.Quiet})}
	if s.j.Etcd != "" {
		c, err := newEtcdClient(s.j.Etcd)
		if err != nil {
			return err
		}
		s.stopReg = func() { c.Close() }
		reg, err := etcd.NewRegistrar(etcd.RegistrarConfig{Client: c, Prefix: s.j.Prefix})
		if err != nil {
			return err
		}
		opts = append(opts, channel.WithRegistrar(reg))
	}
	if s.ch, err = channel.New(Service, opts...); err != nil {
		return err
	}
	if err = s.ch.RegisterRaw(Method, func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		s.handle(ctx)
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	}); err != nil {
		return err
	}
	return s.ch.Serve(ln)
}

// handle waits out a request's service time (or its deadline), reporting
// the first request.
func (s *childServer) handle(ctx context.Context) {
	if s.handled.Add(1) == 1 {
		s.out.Line(lineFirst, stamp(time.Now()))
	}
	clock.Sleep(ctx, clock.Real, s.j.ServiceTime)
}

// Handle is the plain tchannel-go server's raw handler.
func (s *childServer) Handle(ctx context.Context, args *raw.Args) (*raw.Res, error) {
	s.handle(ctx)
	return &raw.Res{Arg3: args.Arg3}, nil
}

// OnError is part of raw.Handler.
func (*childServer) OnError(context.Context, error) {}

// awaitRegistration reports when a registering server's registration is
// written.
func (s *childServer) awaitRegistration() {
	if s.ch == nil || s.j.Etcd == "" {
		return
	}
	deadline := time.Now().Add(registerLimit)
	for {
		regs := s.ch.Debug().Registrations
		switch {
		case len(regs) == 0:
			s.out.Line(fleet.Error, "the channel listened without registering")
		case regs[0].Registered:
			s.out.Line(lineRegistered, stamp(time.Now()))
		case time.Now().After(deadline):
			why := ""
			if regs[0].LastError != nil {
				why = *regs[0].LastError
			}
			s.out.Line(fleet.Error, fmt.Sprintf("the registration was not written within %v: %s", registerLimit, why))
		default:
			time.Sleep(200 * time.Microsecond)
			continue
		}
		return
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

// close closes the server, waiting within bounds for its connections, and
// stops its registration's etcd client.
func (s *childServer) close() {
	if s.ch != nil {
		s.ch.Close()
	}
	if s.tch != nil {
		s.tch.Close()
		select {
		case <-s.tch.ClosedChan():
		case <-time.After(closeWait):
		}
	}
	s.stopReg()
}

// listenRetrying listens on addr, trying again for up to limit while it is
// in use (the server replaced in place is still leaving).
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

// newEtcdClient returns a client of the etcd at the client URL endpoint.
func newEtcdClient(endpoint string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client of %s: %w", endpoint, err)
	}
	return c, nil
}

// stamp formats t for a line: Unix nanoseconds.
func stamp(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }
