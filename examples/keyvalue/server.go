package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/thrift"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// defaultAddrs are the three instances the halves agree on by default.
const defaultAddrs = "127.0.0.1:4041,127.0.0.1:4042,127.0.0.1:4043"

// serve starts the instances and runs until ctx ends.
func serve(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	listen := fs.String("listen", defaultAddrs, "comma-separated host:port of each instance")
	busy := fs.Int("busy", 0, "how many of the instances (the first ones listed) answer every request Busy")
	maxRPS := fs.Float64("max-rps", 0, "per instance, answer Busy above this many requests per second (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	chs, err := startServers(splitAddrs(*listen), *busy, *maxRPS)
	if err != nil {
		return err
	}
	defer closeAll(chs)
	for i, ch := range chs {
		state := "serving"
		if i < *busy {
			state = "answering Busy"
		}
		fmt.Fprintf(out, "keyvalue instance on %s: %s\n", ch.HostPort(), state)
	}
	<-ctx.Done()
	return nil
}

// startServers starts one Sluice channel per address, each serving the
// generated KeyValue service over one shared store. The first busy
// instances answer every request Busy; maxRPS > 0 makes each instance shed
// load above that rate.
func startServers(addrs []string, busy int, maxRPS float64) ([]*channel.Channel, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no address to listen on")
	}
	if busy < 0 || busy > len(addrs) {
		return nil, fmt.Errorf("-busy is %d, must be in 0..%d (the number of instances)", busy, len(addrs))
	}
	var opts []channel.Option
	if maxRPS > 0 {
		opts = append(opts, channel.WithShedding(channel.ShedConfig{MaxRPS: maxRPS}))
	}
	st := &store{vals: map[string]string{}}
	var chs []*channel.Channel
	for i, addr := range addrs {
		ch, err := channel.New(service, opts...)
		if err != nil {
			closeAll(chs)
			return nil, err
		}
		chs = append(chs, ch)
		h := &handler{store: st, ch: ch, busy: i < busy}
		thrift.NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(h))
		if err := ch.ListenAndServe(addr); err != nil {
			closeAll(chs)
			return nil, err
		}
	}
	return chs, nil
}

func closeAll(chs []*channel.Channel) {
	for _, ch := range chs {
		ch.Close()
	}
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// store is the key-value map every instance serves, standing in for a
// replicated back end.
type store struct {
	mu   sync.RWMutex
	vals map[string]string
}

// handler is one instance's implementation of the generated
// keyvalue.TChanKeyValue interface.
type handler struct {
	store *store
	ch    *channel.Channel
	busy  bool
}

var _ keyvalue.TChanKeyValue = (*handler)(nil)

// Response headers every answer carries, for the client to print.
const (
	headerServedBy = "served-by" // host:port of the instance
	headerAttempt  = "attempt"   // 1 for the original request, 2 for the first retry...
)

// begin answers Busy on a busy instance and otherwise tags the response
// with the instance and the attempt number the client sent.
func (h *handler) begin(ctx tthrift.Context) error {
	if h.busy {
		return channel.Busy("keyvalue instance %s is overloaded", h.ch.HostPort())
	}
	ctx.SetResponseHeaders(map[string]string{
		headerServedBy: h.ch.HostPort(),
		headerAttempt:  strconv.Itoa(thrift.PreviousAttempts(ctx) + 1),
	})
	return nil
}

// Get returns the value of key, KeyNotFound if it has none, InvalidKey if
// it does not start with a letter.
func (h *handler) Get(ctx tthrift.Context, key string) (string, error) {
	if err := h.begin(ctx); err != nil {
		return "", err
	}
	if !validKey(key) {
		return "", &keyvalue.InvalidKey{}
	}
	h.store.mu.RLock()
	defer h.store.mu.RUnlock()
	v, ok := h.store.vals[key]
	if !ok {
		return "", &keyvalue.KeyNotFound{Key: key}
	}
	return v, nil
}

// Set stores value under key, or returns InvalidKey.
func (h *handler) Set(ctx tthrift.Context, key, value string) error {
	if err := h.begin(ctx); err != nil {
		return err
	}
	if !validKey(key) {
		return &keyvalue.InvalidKey{}
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	h.store.vals[key] = value
	return nil
}

// HealthCheck reports the instance healthy.
func (h *handler) HealthCheck(ctx tthrift.Context) (string, error) {
	if err := h.begin(ctx); err != nil {
		return "", err
	}
	return "OK", nil
}

func validKey(key string) bool {
	r, _ := utf8.DecodeRuneInString(key)
	return unicode.IsLetter(r)
}
