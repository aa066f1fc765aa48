package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/internal/thriftjson"
)

var callHelp = helpText{
	synopsis: `sluice call -p HOST:PORT -s SERVICE -m METHOD [-r BODY | -f FILE] [flags]
sluice call -p HOST:PORT -t FILE.thrift [flags] SERVICE Service::method [-r BODY]
sluice call -p HOST:PORT --health SERVICE
sluice call -p HOST:PORT [--tls | --tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME] [--tls-fallback] ...`,
	about: `Makes one call through Sluice's pipeline (peer choice, busy throttling,
retries or hedges under a budget), as yab and tcurl make one: the response body,
and nothing else, goes to stdout, so that 'sluice call ... | jq .' works. With -v
the peer, the attempts, the response headers and the time go to stderr. The
service and method may follow the flags as two words, as in yab.

The call is JSON (-e json, the default: the body must be JSON, {} if none is
given), raw (-e raw: arg3 as given, arg2 from --arg2) or Thrift (-t FILE.thrift,
or -e thrift). A Thrift call names its method Service::method; its JSON request
is turned into the method's arguments through the IDL ({"key": "a"} for
Get(1: string key)), and the answer back into JSON as yab prints its body:
{"result": ...}, {} for a void method, or {"NAME": {...}} for the declared
exception NAME. --health calls Meta::health, which every tchannel-go Thrift
server answers. -H sets application headers of JSON and Thrift calls; --sk,
--rk, --rd and --caller set TChannel's transport headers.

A retry or hedging policy comes from flags (--retry-max, --hedge-max) or from
a service config file (--service-config). A peer that refuses connections
fails the call at once with UNAVAILABLE rather than at the timeout, as does
one whose TLS handshake fails (the error says why: a certificate for another
name, a server that requires a client certificate, or a plaintext port).

` + clientTLSHelp + `

` + targetsHelp + `

Exit status: 0 when the call succeeded (with --health: the server said ok); 1
when it failed, with a system error (BUSY, TIMEOUT, UNAVAILABLE, ...) or an
application error: a JSON or raw handler's error, or a Thrift exception, whose
body still goes to stdout and whose name goes to stderr; 2 on a usage error.`,
	examples: `sluice call -t keyvalue.thrift -p 127.0.0.1:4040 keyvalue KeyValue::Get -r '{"key":"a"}'
sluice call -t keyvalue.thrift -p 127.0.0.1:4040 -s keyvalue -m KeyValue::Set -r '{"key":"a","value":"1"}' -H user:root
sluice call -p 127.0.0.1:4040 --health keyvalue
sluice call -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' | jq .
sluice call -p 127.0.0.1:4040 -s kv -m echo -e raw --arg2 meta -r hello
echo '{"key":"a"}' | sluice call -p 127.0.0.1:4040 -s kv -m get -f -
sluice call -P peers.txt -s kv -m get -r '{"key":"a"}' --retry-max 3 -v
sluice call -P dns:///kv.default.svc.cluster.local:4040 -s kv -m get -r '{"key":"a"}' --sk user-42
sluice call -P etcd://127.0.0.1:2379/services/kv -s kv -m get -r '{"key":"a"}'
sluice call -p 127.0.0.1:4040 -s kv -m get -f request.json -H auth:secret --timeout 200ms
sluice call -p 127.0.0.1:4040 --tls-ca ca.pem --tls-cert c.pem --tls-key c-key.pem -s echo -m echo -r '{"a":1}'   # mutual TLS`,
}

func callCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice call", callHelp, stdout, stderr)
	peers := addPeerFlags(fs)
	tf := addTargetFlags(fs, "the TChannel `SERVICE` to call", "the `METHOD` (endpoint) to call; Service::method for Thrift", "the request `BODY` (arg3; JSON for -e json and thrift)")
	timeout := fs.Duration("timeout", time.Second, "the whole call's deadline, across attempts")
	verbose := fs.Bool("verbose", false, "print the peer, attempts, response headers and time on stderr")
	fs.alias("v", "verbose")
	policy := addPolicyFlags(fs.FlagSet, false)
	tlsFlags := addChannelClientTLSFlags(fs)
	words, code, ok := fs.parseWords(args, 2)
	if !ok {
		return code
	}

	src, err := peers.source()
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer src.close()
	if src.empty() {
		return fs.usageError("give a peer: -p HOST:PORT (repeatable) or -P TARGET")
	}
	if *timeout <= 0 {
		return fs.usageError("--timeout is %v, must be > 0", *timeout)
	}
	tg, err := tf.resolve(words)
	if err != nil {
		return fs.usageError("%v", err)
	}
	cfg, err := policy.serviceConfig(tg.service, tg.method)
	if err != nil {
		return fs.usageError("%v", err)
	}
	// A fallback to plaintext is a downgrade: say so on stderr.
	tlsOpts, err := tlsFlags.options(nil)
	if err != nil {
		return fs.usageError("%v", err)
	}

	ch, err := channel.New("sluice-call", append([]channel.Option{channel.WithServiceConfig(cfg),
		channel.WithLogger(configWarnings(stderr))}, tlsOpts...)...)
	if err != nil {
		return fs.usageError("%v", err)
	}
	defer ch.Close()
	cl, err := src.client(ch, tg.service, tg.method)
	if err != nil {
		return fs.usageError("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	res, err := cl.Call(ctx, tg.method, tg.req, tg.opts...)
	elapsed := time.Since(start)
	if err != nil {
		fs.failure("%v", err) // the error names the code
		var ce *channel.CallError
		if errors.As(err, &ce) && *verbose {
			fmt.Fprintf(stderr, "attempts  %d\npeers     %s\ntime      %v\n", ce.Attempts, strings.Join(ce.Peers, " "), elapsed)
		}
		return exitFail
	}
	out := res.Arg3
	var answer *thriftjson.Answer
	if tg.thrift != nil {
		if answer, err = tg.thrift.Answer(res.Arg3); err != nil {
			return fs.failure("%v (from %s)", err, res.Peer)
		}
		out = answer.JSON
	}
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	stdout.Write(out)
	if *verbose {
		fmt.Fprintf(stderr, "peer      %s\nattempts  %d\npeers     %s\n", res.Peer, res.Attempts, strings.Join(res.Peers, " "))
		if len(res.Headers) > 0 {
			h, _ := json.Marshal(res.Headers)
			fmt.Fprintf(stderr, "headers   %s\n", h)
		}
		fmt.Fprintf(stderr, "time      %v\n", elapsed)
	}
	switch {
	case answer != nil && answer.Exception != "":
		return fs.failure("application error: %s threw %s (%s), printed on stdout", tg.method, answer.Exception, answer.ExceptionType)
	case res.AppError:
		return fs.failure("application error: the handler answered with an error, whose body is on stdout")
	case *tf.health:
		healthy, msg, err := thriftjson.Healthy(answer)
		if err != nil {
			return fs.failure("%v", err)
		}
		if !healthy {
			return fs.failure("%s is not healthy: %s", tg.service, cmp.Or(msg, "Meta::health answered ok=false"))
		}
	}
	return exitOK
}
