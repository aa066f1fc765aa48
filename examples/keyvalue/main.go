// Command keyvalue is a Thrift key-value service and its client on Sluice,
// built from the code tchannel-go's thrift-gen generated for
// tchannel-go/examples/keyvalue/keyvalue.thrift, used unchanged.
//
// The server half runs several instances of the TChannel service "keyvalue"
// on 127.0.0.1, sharing one in-memory store; the client half calls them with
// the retry policy of a service-config file. See README.md.
//
//	keyvalue serve [-listen addrs] [-busy n] [-max-rps r]
//	keyvalue get   [-peers addrs] [-config file] key
//	keyvalue set   [-peers addrs] [-config file] key value
//	keyvalue load  [-peers addrs] [-config file] [-n calls] [-key key]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// service is the TChannel service name the instances serve under.
const service = "keyvalue"

const usage = `usage:
  keyvalue serve [-listen addrs] [-busy n] [-max-rps r]
  keyvalue get   [-peers addrs] [-config file] key
  keyvalue set   [-peers addrs] [-config file] key value
  keyvalue load  [-peers addrs] [-config file] [-n calls] [-key key]
Run "keyvalue <command> -h" for a command's flags`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "keyvalue:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New(usage)

// run runs one command; serve runs until ctx ends.
func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], out)
	case "get", "set", "load":
		return client(ctx, args[0], args[1:], out)
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
