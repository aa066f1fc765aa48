package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/internal/thriftjson"
)

// stdin is what `-f -` reads; tests replace it.
var stdin io.Reader = os.Stdin

// maxBodyFile bounds a request body read from a file or stdin: the most
// the tool's Channels send (they keep channel.DefaultMaxRequestSize), so a
// larger body is a usage error here, not a call that fails BAD_REQUEST
// after the whole file is read, or a bench of such calls.
const maxBodyFile = channel.DefaultMaxRequestSize

// targetFlags are the flags saying what `call` and `bench` call and send,
// with one meaning in both. They follow yab's: -s/--service,
// -m/--method (or yab's positional SERVICE METHOD), -e/--encoding,
// -r/--request, -f/--file, -t/--thrift, -H/--header, --health, --sk,
// --rk, --rd and --caller.
type targetFlags struct {
	service, method, encoding, body, file, thrift, arg2 *string
	health                                              *bool
	headers                                             multiFlag
	shardKey, routingKey, routingDelegate, caller       *string
}

// addTargetFlags defines the target flags on fs, with the command's own
// wording of the service, method and body.
func addTargetFlags(fs *flagSet, serviceUsage, methodUsage, bodyUsage string) *targetFlags {
	t := &targetFlags{
		service:         fs.String("service", "", serviceUsage),
		method:          fs.String("method", "", methodUsage),
		encoding:        fs.String("encoding", "", "the calls' `ENCODING`: json, raw or thrift (default json, or thrift with -t or --health)"),
		body:            fs.String("request", "", bodyUsage),
		file:            fs.String("file", "", "read the request body from `FILE` (- for stdin)"),
		thrift:          fs.String("thrift", "", "the Thrift IDL `FILE` (includes resolved) that turns the JSON request into the method's arguments and the answer back into JSON"),
		arg2:            fs.String("arg2", "", "a raw call's arg2 `BYTES` (-e raw), as some raw services read their headers there"),
		health:          fs.Bool("health", false, "check the service's health: call Meta::health, which every tchannel-go Thrift server answers"),
		shardKey:        fs.String("sk", "", "the shard `KEY`, sent as TChannel's sk transport header"),
		routingKey:      fs.String("rk", "", "the routing `KEY`, sent as TChannel's rk transport header, for relays that route on it"),
		routingDelegate: fs.String("rd", "", "the routing delegate `SERVICE`, sent as TChannel's rd transport header"),
		caller:          fs.String("caller", "", "the caller `NAME` the server sees (TChannel's cn header; default the tool's own name)"),
	}
	fs.Var(&t.headers, "header", "an application header `KEY:VALUE` of a JSON or Thrift call (repeatable)")
	fs.alias("s", "service")
	fs.alias("m", "method")
	fs.alias("e", "encoding")
	fs.alias("r", "request")
	fs.alias("f", "file")
	fs.alias("t", "thrift")
	fs.alias("H", "header")
	return t
}

// target is what a call sends, resolved from the target flags.
type target struct {
	service, method string
	encoding        string // json, raw or thrift
	req             *channel.Request
	opts            []channel.CallOption
	// thrift turns the answer of a Thrift call into JSON; nil otherwise.
	thrift *thriftjson.Method
}

// resolve checks the target flags, with the command's positional words
// (yab's SERVICE METHOD), and builds the request. Its errors are usage
// errors: nothing was sent.
func (t *targetFlags) resolve(positional []string) (*target, error) {
	service, method := *t.service, *t.method
	for _, word := range positional {
		switch {
		case service == "":
			service = word
		case method == "":
			method = word
		default:
			return nil, fmt.Errorf("unexpected argument %q: the service and method are already %q and %q", word, service, method)
		}
	}
	enc := *t.encoding
	if enc == "" {
		enc = "json"
		if *t.thrift != "" || *t.health {
			enc = "thrift"
		}
	}
	switch {
	case enc != "json" && enc != "raw" && enc != "thrift":
		return nil, fmt.Errorf("-e/--encoding is %q, must be json, raw or thrift", enc)
	case *t.health && enc != "thrift":
		return nil, fmt.Errorf("--health is a Thrift call (Meta::health); -e/--encoding is %s", enc)
	case *t.health && method != "":
		return nil, fmt.Errorf("--health calls Meta::health; drop -m/--method %q", method)
	case enc == "thrift" && *t.thrift == "" && !*t.health:
		return nil, errors.New("-e thrift needs the IDL: -t/--thrift FILE.thrift")
	case *t.thrift != "" && enc != "thrift":
		return nil, fmt.Errorf("-t/--thrift makes a Thrift call; -e/--encoding is %s", enc)
	case *t.arg2 != "" && enc != "raw":
		return nil, fmt.Errorf("--arg2 is a raw call's arg2; -e/--encoding is %s (its headers come from -H)", enc)
	case len(t.headers) > 0 && enc == "raw":
		return nil, errors.New("-H/--header needs -e json or thrift: a raw call's arg2 is not headers (see --arg2)")
	case *t.body != "" && *t.file != "":
		return nil, errors.New("give -r/--request or -f/--file, not both")
	}
	tg := &target{service: service, method: method, encoding: enc}
	if *t.health {
		tg.thrift = thriftjson.Health()
		tg.method = tg.thrift.Name
	}
	switch {
	case tg.service == "":
		return nil, errors.New("give the service: -s/--service SERVICE, or SERVICE METHOD after the flags")
	case tg.method == "" && len(positional) > 0:
		return nil, fmt.Errorf("give the method: the word %q after the flags is the service; follow it with the method, or give -m/--method METHOD", positional[0])
	case tg.method == "":
		return nil, errors.New("give the method: -m/--method METHOD, or SERVICE METHOD after the flags")
	}
	body, err := t.readBody()
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for _, h := range t.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || k == "" {
			return nil, fmt.Errorf("-H/--header %q: want key:value", h)
		}
		headers[k] = v
	}
	switch enc {
	case "raw":
		tg.req = &channel.Request{Format: tchannel.Raw, Arg2: []byte(*t.arg2), Arg3: body}
	case "json":
		if len(strings.TrimSpace(string(body))) == 0 {
			body = []byte("{}")
		}
		if !json.Valid(body) {
			return nil, errors.New("the request body is not valid JSON (-e json)")
		}
		tg.req = &channel.Request{Format: tchannel.JSON, Headers: headers, Arg3: body}
	case "thrift":
		if tg.thrift == nil {
			idl, err := thriftjson.Load(*t.thrift)
			if err != nil {
				return nil, fmt.Errorf("-t/--thrift: %w", err)
			}
			if tg.thrift, err = idl.Method(tg.method); err != nil {
				return nil, err
			}
		}
		arg3, err := tg.thrift.Request(body)
		if err != nil {
			return nil, err
		}
		tg.req = &channel.Request{Format: tchannel.Thrift, Headers: headers, Arg3: arg3}
	}
	tg.opts = t.transportOptions()
	return tg, nil
}

// readBody returns -r's body, or -f's file's (stdin for -).
func (t *targetFlags) readBody() ([]byte, error) {
	if *t.file == "" {
		return []byte(*t.body), nil
	}
	var r io.Reader = stdin
	if *t.file != "-" {
		f, err := os.Open(*t.file)
		if err != nil {
			return nil, fmt.Errorf("-f/--file: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBodyFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("-f/--file %s: %w", *t.file, err)
	case len(b) > maxBodyFile:
		return nil, fmt.Errorf("-f/--file %s: the body is over %d MiB, the most a call sends", *t.file, maxBodyFile>>20)
	}
	return b, nil
}

// transportOptions are the call options of --sk, --rk, --rd and --caller.
func (t *targetFlags) transportOptions() []channel.CallOption {
	var opts []channel.CallOption
	if *t.shardKey != "" {
		opts = append(opts, channel.WithShardKey(*t.shardKey))
	}
	if *t.routingKey != "" {
		opts = append(opts, channel.WithRoutingKey(*t.routingKey))
	}
	if *t.routingDelegate != "" {
		opts = append(opts, channel.WithRoutingDelegate(*t.routingDelegate))
	}
	if *t.caller != "" {
		opts = append(opts, channel.WithCallerName(*t.caller))
	}
	return opts
}
