package cli

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

var callHelp = Help{
	Synopsis: `sluice call -p HOST:PORT -s SERVICE -m METHOD [-r BODY | -f FILE] [flags]
sluice call -p HOST:PORT -t FILE.thrift [flags] SERVICE Service::method [BODY]
sluice call -y FILE.yab [-A NAME:VALUE ...] [flags]
sluice call -p HOST:PORT --health SERVICE
sluice call -p HOST:PORT [--tls | --tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME] [--tls-fallback] ...`,
	About: `Makes one call through Sluice's pipeline (peer choice, busy throttling,
retries or hedges under a budget), as yab and tcurl make one: the response
body, and nothing else, goes to stdout, so that 'sluice call ... | jq .'
works; -v adds the peer, the attempts, the response headers and the time on
stderr. -o yab prints yab's JSON envelope instead, byte for byte, and exits
as yab. The service, method and body may follow the flags as words, as in
yab. The call is JSON (-e json, the default), raw (-e raw) or Thrift (-t
FILE.thrift: the request, JSON or YAML, becomes the method's arguments, and
the answer prints as yab prints its body). --health calls Meta::health. -y
FILE makes the call a yab YAML template describes, its ${NAME}s filled by
-A NAME:VALUE; the command line's flags win over its keys. A retry or
hedging policy comes from flags (--retry-max, --hedge-max) or from
--service-config. docs/cli.md maps every yab flag to Sluice's, and says
where they differ.

` + clientTLSHelp + `

` + targetsHelp + `

Exit status: 0 when the call succeeded (with --health: the server said ok); 1
when it failed, with a system error (BUSY, TIMEOUT, UNAVAILABLE, ...) or an
application error (a Thrift exception included), whose body still goes to
stdout; 2 on a usage error. With -o yab, yab's: 0 for any answer, 1 for a
failed call or a usage error.

The Thrift examples call examples/keyvalue (go run ./examples/keyvalue
serve), whose IDL is examples/keyvalue/keyvalue.thrift.`,
	Examples: `sluice call -t examples/keyvalue/keyvalue.thrift -p 127.0.0.1:4041 keyvalue KeyValue::Get '{"key":"a"}'
sluice call -t examples/keyvalue/keyvalue.thrift -p 127.0.0.1:4041 keyvalue KeyValue::Set -r '{key: a, value: "1"}'
sluice call -t examples/keyvalue/keyvalue.thrift -p 127.0.0.1:4041 -s keyvalue -m KeyValue::Get -r '{"key":"a"}' -o yab --timeout 500
sluice call -y get.yab -A key:a      # get.yab: service, thrift, method, request: {key: ${key:a}}
sluice call -p 127.0.0.1:4040 --health keyvalue
sluice call -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' | jq .
sluice call -p 127.0.0.1:4040 -s kv -m get -r '{"key":"a"}' --headers 'auth: secret' -H trace:1
sluice call -p 127.0.0.1:4040 -s kv -m echo -e raw --arg2 meta -r hello
echo '{"key":"a"}' | sluice call -p 127.0.0.1:4040 -s kv -m get -f -
sluice call -P peers.txt -s kv -m get -r '{"key":"a"}' --retry-max 3 -v
sluice call -P dns:///kv.default.svc.cluster.local:4040 -s kv -m get -r '{"key":"a"}' --sk user-42
sluice-lab call -P etcd://127.0.0.1:2379/services/kv -s kv -m get -r '{"key":"a"}'
sluice call -p 127.0.0.1:4040 -s kv -m get -f request.json -H auth:secret --timeout 200ms
sluice call -p 127.0.0.1:4040 --tls-ca ca.pem --tls-cert c.pem --tls-key c-key.pem -s echo -m echo -r '{"a":1}'   # mutual TLS`,
}

func callCmd(args []string, lab *Lab, stdout, stderr io.Writer) int {
	code := callRun(args, lab, stdout, stderr)
	if code == ExitUsage && asYab(args) {
		return ExitFail // yab's status for a usage error
	}
	return code
}

// asYab reports whether args ask for -o yab. It reads the words before
// they are parsed, so that a usage error in any flag, before or after -o,
// exits as yab's do.
func asYab(args []string) bool {
	for i, a := range args {
		switch a {
		case "-o", "--o", "-output", "--output":
			if i+1 < len(args) && args[i+1] == "yab" {
				return true
			}
		case "-o=yab", "--o=yab", "-output=yab", "--output=yab":
			return true
		case "--":
			return false
		}
	}
	return false
}

func callRun(args []string, lab *Lab, stdout, stderr io.Writer) int {
	fs := NewFlagSet("sluice call", callHelp, stdout, stderr)
	peers := addPeerFlags(fs, lab)
	tf := addTargetFlags(fs, "the TChannel `SERVICE` to call", "the `METHOD` (endpoint) to call; Service::method for Thrift", "the request `BODY` (arg3): JSON for -e json; JSON or YAML for thrift")
	tf.takesBody = true
	timeout := msDuration(time.Second)
	fs.Var(&timeout, "timeout", "the whole call's deadline, across attempts: a `DURATION` (500ms, 2s) or, as yab reads it, whole milliseconds (500)")
	verbose := fs.Bool("verbose", false, "print the peer, attempts, response headers and time on stderr")
	fs.alias("v", "verbose")
	tmpl := fs.String("yaml-template", "", "make the call a yab YAML template `FILE` describes (see above); flags given win over its keys")
	fs.alias("y", "yaml-template")
	var tmplArgs multiFlag
	fs.Var(&tmplArgs, "arg", "a template argument `NAME:VALUE`, filling ${NAME} in -y's request (repeatable)")
	fs.alias("A", "arg")
	output := fs.String("output", "body", "the `FORMAT` of stdout: body, the response body alone; or yab, yab's JSON envelope (body, headers, ok, trace) with yab's exit statuses")
	fs.alias("o", "output")
	policy := addPolicyFlags(fs.FlagSet, false)
	tlsFlags := addChannelClientTLSFlags(fs)
	words, code, ok := fs.parseWords(args, 3)
	if !ok {
		return code
	}
	if *output != "body" && *output != "yab" {
		return fs.UsageError("-o/--output is %q, must be body or yab", *output)
	}
	yabOut := *output == "yab"
	switch {
	case *tmpl != "":
		if err := applyTemplate(fs, tf, *tmpl, tmplArgs); err != nil {
			return fs.UsageError("-y/--yaml-template: %v", err)
		}
	case len(tmplArgs) > 0:
		return fs.UsageError("-A/--arg fills a template's ${NAME}: give the template with -y FILE")
	}

	src, err := peers.source()
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer src.close()
	if src.empty() {
		return fs.UsageError("give a peer: -p HOST:PORT (repeatable) or -P TARGET")
	}
	if timeout <= 0 {
		return fs.UsageError("--timeout is %v, must be > 0", time.Duration(timeout))
	}
	tg, err := tf.resolve(words)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	cfg, err := policy.serviceConfig(tg.service, tg.method)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	// A fallback to plaintext is a downgrade: say so on stderr.
	tlsOpts, err := tlsFlags.options(nil)
	if err != nil {
		return fs.UsageError("%v", err)
	}

	cl, closeCh, err := src.client("sluice-call", tg, append([]channel.Option{channel.WithServiceConfig(cfg),
		channel.WithLogger(configWarnings(stderr))}, tlsOpts...)...)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer closeCh()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout))
	defer cancel()
	start := time.Now()
	res, err := cl.Call(ctx, tg.method, tg.req, tg.opts...)
	elapsed := time.Since(start)
	if err != nil {
		fs.Failure("%v", err) // the error names the code
		var ce *channel.CallError
		if errors.As(err, &ce) && *verbose {
			fmt.Fprintf(stderr, "attempts  %d\npeers     %s\ntime      %v\n", ce.Attempts, strings.Join(ce.Peers, " "), elapsed)
		}
		return ExitFail
	}
	out, answer, err := tg.answer(res)
	if err == nil && yabOut {
		out, err = yabEnvelope(tg, out, res)
	}
	if err != nil {
		return fs.Failure("%v (from %s)", err, res.Peer)
	}
	if !yabOut && !bytes.HasSuffix(out, []byte("\n")) {
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
	case yabOut:
		// yab's statuses: 0 for any answer, a declared exception and an
		// application error included ("ok": false says so).
		return ExitOK
	case answer != nil && answer.Exception != "":
		return fs.Failure("application error: %s threw %s (%s), printed on stdout", tg.method, answer.Exception, answer.ExceptionType)
	case res.AppError:
		return fs.Failure("application error: the handler answered with an error, whose body is on stdout")
	case *tf.health:
		healthy, msg, err := thriftjson.Healthy(answer)
		if err != nil {
			return fs.Failure("%v", err)
		}
		if !healthy {
			return fs.Failure("%s is not healthy: %s", tg.service, cmp.Or(msg, "Meta::health answered ok=false"))
		}
	}
	return ExitOK
}

// answer is res's body as call prints it: a Thrift answer as JSON.
func (tg *target) answer(res *channel.Response) ([]byte, *thriftjson.Answer, error) {
	if tg.thrift == nil {
		return res.Arg3, nil, nil
	}
	a, err := tg.thrift.Answer(res.Arg3)
	if err != nil {
		return nil, nil, err
	}
	return a.JSON, a, nil
}

// yabEnvelope is what yab prints for an answer, indented by two spaces,
// then a blank line. A JSON body is read as yab reads it, into Go values
// (keys sorted, 1.0 printed as 1); raw bytes print as base64. "trace" is
// "0": Sluice starts no Jaeger trace, as yab without --jaeger.
func yabEnvelope(tg *target, body []byte, res *channel.Response) ([]byte, error) {
	var b any = body // raw: []byte marshals as base64
	switch tg.encoding {
	case "thrift":
		b = json.RawMessage(body)
	case "json":
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, fmt.Errorf("the answer is not JSON (-e json), which -o yab prints as JSON: %w", err)
		}
	}
	env := map[string]any{"body": b, "ok": !res.AppError, "trace": "0"}
	if len(res.Headers) > 0 {
		env["headers"] = res.Headers
	}
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, "\n\n"...), nil
}
