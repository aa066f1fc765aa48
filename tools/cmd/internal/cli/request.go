package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/tools/internal/thriftjson"
)

// stdin is what `-f -` reads; tests replace it.
var stdin io.Reader = os.Stdin

// maxBodyFile bounds a body read from a file or stdin: the most the
// tool's client Channels send (peerSource.client gives it to
// channel.WithMaxRequestSize), so that a larger one is a usage error, not
// calls that fail BAD_REQUEST.
const maxBodyFile = 4 << 20

// targetFlags say what call and bench call and send, as yab's do.
type targetFlags struct {
	service, method, encoding, body, file, thrift, arg2 *string
	health, noEnvelope                                  *bool
	headers                                             multiFlag
	headersText, headersFile                            *string
	shardKey, routingKey, routingDelegate, caller       *string

	// takesBody lets a word after SERVICE METHOD be the body, as yab's
	// third word (call; bench takes the body from -r or -f only).
	takesBody bool
	// From a template (call -y): the body when none is given, and
	// headers under the flags'.
	defaultBody    func() ([]byte, error)
	defaultHeaders map[string]string
}

// addTargetFlags defines the target flags on fs, with the command's
// usage of the service, method and body.
func addTargetFlags(fs *FlagSet, serviceUsage, methodUsage, bodyUsage string) *targetFlags {
	t := &targetFlags{
		service:         fs.String("service", "", serviceUsage),
		method:          fs.String("method", "", methodUsage),
		encoding:        fs.String("encoding", "", "the calls' `ENCODING`: json, raw or thrift (default json, or thrift with -t or --health)"),
		body:            fs.String("request", "", bodyUsage),
		file:            fs.String("file", "", "read the request body from `FILE` (- for stdin)"),
		thrift:          fs.String("thrift", "", "the Thrift IDL `FILE` (includes resolved) that turns the JSON request into the method's arguments and the answer back into JSON"),
		arg2:            fs.String("arg2", "", "a raw call's arg2 `BYTES` (-e raw), as some raw services read their headers there; of a JSON or Thrift call, whose arg2 is its headers, the same as --headers (yab's --arg2)"),
		health:          fs.Bool("health", false, "check the service's health: call Meta::health, which every tchannel-go Thrift server answers"),
		shardKey:        fs.String("sk", "", "the shard `KEY`, sent as TChannel's sk transport header"),
		routingKey:      fs.String("rk", "", "the routing `KEY`, sent as TChannel's rk transport header, for relays that route on it"),
		routingDelegate: fs.String("rd", "", "the routing delegate `SERVICE`, sent as TChannel's rd transport header"),
		caller:          fs.String("caller", "", "the caller `NAME` the server sees (TChannel's cn header; default the tool's own name)"),
	}
	fs.Var(&t.headers, "header", "an application header `KEY:VALUE` of a JSON or Thrift call (repeatable; over --headers)")
	t.headersText = fs.String("headers", "", "the application headers of a JSON or Thrift call as a JSON or YAML `MAP` ({\"user\": \"root\"} or 'user: root')")
	t.headersFile = fs.String("headers-file", "", "read --headers' map from `FILE` (- for stdin)")
	t.noEnvelope = fs.Bool("disable-thrift-envelope", false, "accepted for yab's sake: TChannel's Thrift calls never have an envelope, so it changes nothing")
	fs.StringVar(t.method, "procedure", "", "the same as -m/--method `METHOD` (yab's name for it)")
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
// (yab's SERVICE METHOD BODY; bench takes no BODY word), and builds the
// request. Its errors are usage errors: nothing was sent.
func (t *targetFlags) resolve(positional []string) (*target, error) {
	service, method := *t.service, *t.method
	var bodyWord *string
	for _, word := range positional {
		switch {
		case service == "":
			service = word
		case method == "":
			method = word
		case bodyWord == nil && t.takesBody && *t.body == "" && *t.file == "":
			bodyWord = &word
		case t.takesBody:
			return nil, fmt.Errorf("unexpected argument %q: the service, method and body are already given", word)
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
	case *t.encoding == "" && *t.thrift == "" && !*t.health && strings.Contains(method, "::"):
		// As yab: a Service::method is Thrift, which needs the IDL. Sent
		// as JSON it would wait for the timeout on a Thrift server.
		return nil, fmt.Errorf("%s is a Thrift method: give its IDL with -t/--thrift FILE.thrift", method)
	case *t.health && enc != "thrift":
		return nil, fmt.Errorf("--health is a Thrift call (Meta::health); -e/--encoding is %s", enc)
	case *t.health && method != "":
		return nil, fmt.Errorf("--health calls Meta::health; drop -m/--method %q", method)
	case enc == "thrift" && *t.thrift == "" && !*t.health:
		return nil, errors.New("-e thrift needs the IDL: -t/--thrift FILE.thrift")
	case *t.thrift != "" && enc != "thrift":
		return nil, fmt.Errorf("-t/--thrift makes a Thrift call; -e/--encoding is %s", enc)
	case enc == "raw" && (len(t.headers) > 0 || *t.headersText != "" || *t.headersFile != ""):
		name := "-H/--header"
		switch {
		case len(t.headers) > 0:
		case *t.headersText != "":
			name = "--headers"
		default:
			name = "--headers-file"
		}
		return nil, fmt.Errorf("%s needs -e json or thrift: a raw call's arg2 is not headers (see --arg2)", name)
	case *t.headersText != "" && *t.headersFile != "", *t.arg2 != "" && enc != "raw" && (*t.headersText != "" || *t.headersFile != ""):
		return nil, errors.New("give the headers' map once: --headers, --headers-file or --arg2")
	case *t.noEnvelope && enc != "thrift":
		return nil, fmt.Errorf("--disable-thrift-envelope is for Thrift calls; -e/--encoding is %s", enc)
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
	body, err := t.readBody(bodyWord)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	if enc != "raw" {
		if headers, err = t.readHeaders(); err != nil {
			return nil, err
		}
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
		if !json.Valid(body) && len(bytes.TrimSpace(body)) > 0 {
			// yab's other form of a Thrift request: YAML ('key: a').
			if body, err = yamlToJSON(body); err != nil {
				return nil, fmt.Errorf("the request body is neither JSON nor YAML: %w", err)
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

// readBody returns -r's body (or the BODY word), or -f's file's (stdin
// for -), or else a template's.
func (t *targetFlags) readBody(word *string) ([]byte, error) {
	switch {
	case word != nil:
		return []byte(*word), nil
	case *t.file != "":
		return readFileFlag("-f/--file", *t.file, "the body")
	case *t.body == "" && t.defaultBody != nil:
		return t.defaultBody()
	}
	return []byte(*t.body), nil
}

// readFileFlag reads the file a flag names (stdin for -), within
// maxBodyFile.
func readFileFlag(flagName, path, what string) ([]byte, error) {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBodyFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w", flagName, path, err)
	case len(b) > maxBodyFile:
		return nil, fmt.Errorf("%s %s: %s is over %d MiB, the most a call sends", flagName, path, what, maxBodyFile>>20)
	}
	return b, nil
}

// readHeaders returns a JSON or Thrift call's application headers: a
// template's, under the map of --headers, --headers-file or --arg2 (yab's
// hidden --arg2 is --headers there), under each -H.
func (t *targetFlags) readHeaders() (map[string]string, error) {
	headers := map[string]string{}
	maps.Copy(headers, t.defaultHeaders)
	name, text := "--headers", []byte(*t.headersText)
	switch {
	case *t.headersFile != "":
		b, err := readFileFlag("--headers-file", *t.headersFile, "the headers")
		if err != nil {
			return nil, err
		}
		name, text = "--headers-file "+*t.headersFile, b
	case *t.arg2 != "":
		name, text = "--arg2", []byte(*t.arg2)
	}
	if len(bytes.TrimSpace(text)) > 0 {
		m, err := yamlStringMap(text)
		if err != nil {
			return nil, fmt.Errorf("%s: want a map of header names to values, in JSON or YAML: %w", name, err)
		}
		maps.Copy(headers, m)
	}
	for _, h := range t.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || k == "" {
			return nil, fmt.Errorf("-H/--header %q: want key:value", h)
		}
		headers[k] = v
	}
	return headers, nil
}

// transportOptions are the call options of --sk, --rk, --rd and --caller.
func (t *targetFlags) transportOptions() []channel.CallOption {
	var opts []channel.CallOption
	for _, o := range []struct {
		v  *string
		as func(string) channel.CallOption
	}{{t.shardKey, channel.WithShardKey}, {t.routingKey, channel.WithRoutingKey},
		{t.routingDelegate, channel.WithRoutingDelegate}, {t.caller, channel.WithCallerName}} {
		if *o.v != "" {
			opts = append(opts, o.as(*o.v))
		}
	}
	return opts
}
