package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rpc/sluice/peer"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// peerFlags are yab's -p/--peer and -P/--peer-list, shared by call and
// bench.
type peerFlags struct {
	peers multiFlag
	list  string
}

func addPeerFlags(fs *flagSet) *peerFlags {
	p := &peerFlags{}
	fs.Var(&p.peers, "peer", "`HOST:PORT` of a peer (repeatable)")
	fs.alias("p", "peer")
	fs.StringVar(&p.list, "peer-list", "", "a `FILE` of peers: a JSON array or YAML list of host:port strings, or one host:port a line (# comments)")
	fs.alias("P", "peer-list")
	return p
}

// hostPorts returns the peers of --peer and --peer-list, each checked with
// peer.ValidateHostPort; an error names the flag and, for the file, the
// line.
func (p *peerFlags) hostPorts() ([]string, error) {
	var all []string
	for _, hp := range p.peers {
		if err := peer.ValidateHostPort(hp); err != nil {
			return nil, fmt.Errorf("--peer: %v", err)
		}
		all = append(all, hp)
	}
	if p.list != "" {
		data, err := os.ReadFile(p.list)
		if err != nil {
			return nil, fmt.Errorf("--peer-list: %v", err)
		}
		hps, err := parsePeerList(data)
		if err != nil {
			return nil, fmt.Errorf("--peer-list %s: %v", p.list, err)
		}
		all = append(all, hps...)
	}
	return all, nil
}

// parsePeerList reads the peers of a peer-list file, in yab's three
// shapes: one host:port a line (blank lines and # comments ignored), a JSON
// array of "host:port" strings, or a YAML list of them. A file whose every
// line is a host:port or a comment is the first shape (an IPv6 line such as
// [::1]:4040 looks like a JSON array); any other is read as YAML, of which
// JSON is a subset, so that an error names the entry's line either way.
func parsePeerList(data []byte) ([]string, error) {
	hps, lineErr := parsePeerLines(data)
	if lineErr == nil {
		return hps, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, lineErr
	}
	hps = nil
	for _, n := range doc.Content[0].Content {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return nil, fmt.Errorf("line %d: want a \"host:port\" string", n.Line)
		}
		if err := peer.ValidateHostPort(n.Value); err != nil {
			return nil, fmt.Errorf("line %d: %v", n.Line, err)
		}
		hps = append(hps, n.Value)
	}
	if len(hps) == 0 {
		return nil, errors.New("the list is empty")
	}
	return hps, nil
}

// parsePeerLines reads one host:port a line.
func parsePeerLines(data []byte) ([]string, error) {
	var hps []string
	for i, line := range bytes.Split(data, []byte("\n")) {
		s, _, _ := strings.Cut(string(line), "#")
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if err := peer.ValidateHostPort(s); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		hps = append(hps, s)
	}
	if len(hps) == 0 {
		return nil, errors.New("no peers in the file")
	}
	return hps, nil
}

// targetFlags are the flags saying what `call` and `bench` call and send:
// -s/--service, -m/--method, -e/--encoding, -r/--request, with one meaning
// in both.
type targetFlags struct{ service, method, encoding, body *string }

// addTargetFlags defines the target flags on fs, with the command's own
// wording of the service, method and body.
func addTargetFlags(fs *flagSet, serviceUsage, methodUsage, bodyUsage string) targetFlags {
	t := targetFlags{
		service:  fs.String("service", "", serviceUsage),
		method:   fs.String("method", "", methodUsage),
		encoding: fs.String("encoding", "json", "the calls' `ENCODING`: json or raw"),
		body:     fs.String("request", "", bodyUsage),
	}
	fs.alias("s", "service")
	fs.alias("m", "method")
	fs.alias("e", "encoding")
	fs.alias("r", "request")
	return t
}

// checkEncoding reports an --encoding that is neither json nor raw.
func (t targetFlags) checkEncoding() error {
	if e := *t.encoding; e != "json" && e != "raw" {
		return fmt.Errorf("-e/--encoding is %q, must be json or raw", e)
	}
	return nil
}

// checkJSONBody makes an empty JSON body {} and reports one that is not
// JSON; a raw body is left as it is.
func (t targetFlags) checkJSONBody() error {
	if *t.encoding != "json" {
		return nil
	}
	if strings.TrimSpace(*t.body) == "" {
		*t.body = "{}"
	}
	if !json.Valid([]byte(*t.body)) {
		return errors.New("the request body is not valid JSON (-e json)")
	}
	return nil
}
