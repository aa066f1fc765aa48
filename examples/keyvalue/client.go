package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/thrift"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"
)

// client runs the get, set and load commands.
func client(ctx context.Context, cmd string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	peers := fs.String("peers", defaultAddrs, "comma-separated host:port of the instances to call")
	config := fs.String("config", "serviceconfig.json", `service-config file with the retry policy ("": none)`)
	timeout := fs.Duration("timeout", time.Second, "deadline of each call, retries included")
	n := fs.Int("n", 100, "load: number of Get calls")
	loadKey := fs.String("key", "load", "load: the key to set once and then get")
	if err := fs.Parse(args); err != nil {
		return err
	}
	want := map[string]int{"get": 1, "set": 2, "load": 0}[cmd]
	if fs.NArg() != want {
		return fmt.Errorf("%s takes %d argument(s), got %d\n%s", cmd, want, fs.NArg(), usage)
	}

	ch, kvc, err := newClient(*config, splitAddrs(*peers))
	if err != nil {
		return err
	}
	defer ch.Close()
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(kvc))
	call := func(f func(tthrift.Context) error) (map[string]string, error) {
		c, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		tctx := tthrift.Wrap(c)
		err := f(tctx)
		return tctx.ResponseHeaders(), err
	}

	switch cmd {
	case "get":
		var v string
		h, err := call(func(ctx tthrift.Context) (err error) { v, err = kv.Get(ctx, fs.Arg(0)); return err })
		if err != nil {
			return describe(err)
		}
		fmt.Fprintf(out, "%s = %q (%s)\n", fs.Arg(0), v, servedBy(h))
	case "set":
		h, err := call(func(ctx tthrift.Context) error { return kv.Set(ctx, fs.Arg(0), fs.Arg(1)) })
		if err != nil {
			return describe(err)
		}
		fmt.Fprintf(out, "%s set (%s)\n", fs.Arg(0), servedBy(h))
	case "load":
		if *n <= 0 {
			return fmt.Errorf("-n is %d, must be > 0", *n)
		}
		// Calls go only to instances whose connection is ready: have every
		// connection up first, so that the load spreads over all of them
		// from its first call. An instance that cannot be reached is left
		// out, as calls would leave it out.
		c, cancel := context.WithTimeout(ctx, *timeout)
		err := kvc.Connect(c)
		cancel()
		if err != nil {
			fmt.Fprintf(out, "load: %v; calling the instances that are ready\n", err)
		}
		if _, err := call(func(ctx tthrift.Context) error { return kv.Set(ctx, *loadKey, "value") }); err != nil {
			return fmt.Errorf("load: set %s first: %w", *loadKey, describe(err))
		}
		var ok, retried int
		failed := map[string]int{}
		for i := 0; i < *n; i++ {
			h, err := call(func(ctx tthrift.Context) error { _, err := kv.Get(ctx, *loadKey); return err })
			switch {
			case err == nil:
				ok++
				if h[headerAttempt] != "1" {
					retried++
				}
			default:
				failed[outcome(err)]++
			}
		}
		fmt.Fprintf(out, "%d calls: %d ok (%d after a retry), %d failed\n", *n, ok, retried, *n-ok)
		for _, k := range sortedKeys(failed) {
			fmt.Fprintf(out, "  failed %s: %d\n", k, failed[k])
		}
		for _, p := range kvc.Peers() {
			fmt.Fprintf(out, "  peer %s: sent %d, busy %d, throttled %d, limit %.0f\n", p.HostPort, p.Sent, p.Busy, p.Throttled, p.Limit)
		}
	}
	return nil
}

// newClient returns a Sluice channel with the service config read from
// path ("" for none), and its Client of the keyvalue service with the
// instances as peers.
func newClient(path string, peers []string) (*channel.Channel, *channel.Client, error) {
	if len(peers) == 0 {
		return nil, nil, errors.New("no peers: give -peers host:port[,host:port]")
	}
	var opts []channel.Option
	if path != "" {
		cfg, err := loadConfig(path)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, channel.WithServiceConfig(cfg))
	}
	ch, err := channel.New("keyvalue-client", opts...)
	if err != nil {
		return nil, nil, err
	}
	kvc, err := ch.NewClient(service, channel.WithMethods("KeyValue::Get", "KeyValue::Set"))
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	for _, p := range peers {
		if err := kvc.AddPeer(p); err != nil {
			ch.Close()
			return nil, nil, err
		}
	}
	return ch, kvc, nil
}

// loadConfig reads and validates a service-config file.
func loadConfig(path string) (*serviceconfig.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("service config: %w", err)
	}
	cfg, err := serviceconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("service config %s: %w", path, err)
	}
	return cfg, nil
}

func servedBy(h map[string]string) string {
	return fmt.Sprintf("served by %s on attempt %s", h[headerServedBy], h[headerAttempt])
}

// outcome names an error for the load summary: the declared exception's
// type, the TChannel code of a failed call, or the local outcome.
func outcome(err error) string {
	var (
		nf *keyvalue.KeyNotFound
		ik *keyvalue.InvalidKey
		ce *channel.CallError
	)
	switch {
	case errors.As(err, &nf):
		return "KeyNotFound"
	case errors.As(err, &ik):
		return "InvalidKey"
	case errors.As(err, &ce) && (ce.Code.IsLocal() || ce.Code == codes.OK): // failed here: nothing was sent
		return ce.CodeName() + " (local, nothing sent)"
	case errors.As(err, &ce):
		return ce.CodeName()
	}
	return "other: " + err.Error()
}

// describe makes the generated exceptions, whose Error text is terse,
// readable.
func describe(err error) error {
	var nf *keyvalue.KeyNotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("key %q not found", nf.Key)
	}
	var ik *keyvalue.InvalidKey
	if errors.As(err, &ik) {
		return errors.New("invalid key: a key must start with a letter")
	}
	return err
}

func sortedKeys(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
