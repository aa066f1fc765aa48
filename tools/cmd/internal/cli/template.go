package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// yamlValue decodes one YAML document (JSON is YAML too) into values
// encoding/json can write: maps keyed by strings.
func yamlValue(b []byte) (any, error) {
	var v, more any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.Decode(&more) == nil {
		return nil, errors.New("more than one YAML document")
	}
	return jsonable(v), nil
}

// jsonable turns what yaml.v3 decodes into what encoding/json writes:
// a mapping's keys become strings, as yab's do.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
	case time.Time: // an unquoted YAML timestamp: the text, as written
		return v.Format(time.RFC3339Nano)
	}
	return v
}

// yamlToJSON turns a YAML body ('key: a') into the JSON the Thrift
// encoder reads.
func yamlToJSON(b []byte) ([]byte, error) {
	v, err := yamlValue(b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// yamlStringMap reads a JSON or YAML map of strings: headers.
func yamlStringMap(b []byte) (map[string]string, error) {
	v, err := yamlValue(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s", yamlKind(v))
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		switch e := e.(type) {
		case string:
			out[k] = e
		case map[string]any, []any, nil:
			return nil, fmt.Errorf("%s: want a string, got %s", k, yamlKind(e))
		default:
			out[k] = fmt.Sprint(e) // 1, true: as written
		}
	}
	return out, nil
}

func yamlKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("the scalar %v", v)
}

// msDuration is --timeout as yab reads it: a duration (500ms, 1s), or a
// whole number of milliseconds (500).
type msDuration time.Duration

func (d *msDuration) String() string { return time.Duration(*d).String() }

func (d *msDuration) Set(s string) error {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		*d = msDuration(time.Duration(n) * time.Millisecond)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration (500ms, 1.5s) or a whole number of milliseconds (500)")
	}
	*d = msDuration(v)
	return nil
}

// templateKeys maps each key a template may have, in yab's spellings, to
// its name here.
var templateKeys = map[string]string{
	"peer": "peer", "peers": "peers",
	"peerList": "peerList", "peerlist": "peerList", "peer-list": "peerList",
	"service": "service", "method": "method", "procedure": "method",
	"thrift": "thrift", "request": "request", "headers": "headers",
	"timeout": "timeout", "caller": "caller",
	"shardKey": "sk", "shardkey": "sk", "shard-key": "sk", "sk": "sk",
	"routingKey": "rk", "routingkey": "rk", "routing-key": "rk", "rk": "rk",
	"routingDelegate": "rd", "routingdelegate": "rd", "routing-delegate": "rd", "rd": "rd",
	"disableThriftEnvelope": "disable-thrift-envelope", "disablethriftenvelope": "disable-thrift-envelope",
	"disable-thrift-envelope": "disable-thrift-envelope",
	// yab's, refused by name below.
	"baggage": "baggage", "jaeger": "jaeger", "requests": "requests",
}

// applyTemplate reads the template at path into the flags of fs that the
// command line did not set, and the body and headers into tf. args are
// -A's NAME:VALUE pairs. Its errors are usage errors.
func applyTemplate(fs *FlagSet, tf *targetFlags, path string, args []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	vars := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, ":")
		if !ok || k == "" {
			return fmt.Errorf("-A/--arg %q: want NAME:VALUE", a)
		}
		vars[k] = v
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	keys := make(map[string]any, len(raw))
	for k, v := range raw {
		name, ok := templateKeys[k]
		if !ok {
			return fmt.Errorf("%s: unknown key %q; a template has peer, peers, peerList, service, method, thrift, request, headers, timeout, caller, shardKey, routingKey, routingDelegate, disableThriftEnvelope", path, k)
		}
		if _, dup := keys[name]; dup {
			return fmt.Errorf("%s: key %q given twice", path, name)
		}
		keys[name] = v
	}
	for _, k := range []string{"baggage", "jaeger", "requests"} {
		if v := keys[k]; v != nil && v != false {
			return fmt.Errorf("%s: %s is yab's and not supported by sluice call", path, k)
		}
	}
	str := func(k string) (string, error) {
		switch v := keys[k].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		case int, float64, bool:
			return fmt.Sprint(v), nil
		default:
			return "", fmt.Errorf("%s: %s: want a string, got %s", path, k, yamlKind(v))
		}
	}
	// Scalars go to their flags, unless given on the command line.
	for _, k := range []string{"service", "method", "caller", "sk", "rk", "rd", "timeout", "disable-thrift-envelope"} {
		v, err := str(k)
		if err != nil {
			return err
		}
		if v == "" || fs.IsSet(k) || (k == "method" && fs.IsSet("procedure")) {
			continue
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	if v, err := str("thrift"); err != nil {
		return err
	} else if v != "" && !fs.IsSet("thrift") {
		if !filepath.IsAbs(v) {
			v = filepath.Join(filepath.Dir(path), v)
		}
		fs.Set("thrift", v)
	}
	if !fs.IsSet("peer") && !fs.IsSet("peer-list") {
		if err := templatePeers(fs, path, keys, str); err != nil {
			return err
		}
	}
	if h := keys["headers"]; h != nil {
		hb, _ := json.Marshal(h)
		if tf.defaultHeaders, err = yamlStringMap(hb); err != nil {
			return fmt.Errorf("%s: headers: %w", path, err)
		}
	}
	if r := keys["request"]; r != nil {
		// Rendered only without a body on the command line.
		tf.defaultBody = func() ([]byte, error) {
			v, err := render(jsonable(r), vars)
			var b []byte
			if err == nil {
				b, err = json.Marshal(v)
			}
			if err != nil {
				return nil, fmt.Errorf("-y/--yaml-template: %s: request: %w", path, err)
			}
			return b, nil
		}
	}
	return nil
}

// templatePeers sets -p or -P from a template's peer, peers or peerList
// (relative to the template): one of them, as yab reads the first given.
func templatePeers(fs *FlagSet, path string, keys map[string]any, str func(string) (string, error)) error {
	peer, err := str("peer")
	if err != nil {
		return err
	}
	if peer != "" {
		return fs.Set("peer", peer)
	}
	if ps := keys["peers"]; ps != nil {
		list, ok := ps.([]any)
		if !ok {
			return fmt.Errorf("%s: peers: want a list of host:ports, got %s", path, yamlKind(ps))
		}
		for _, p := range list {
			s, ok := p.(string)
			if !ok {
				return fmt.Errorf("%s: peers: want host:port strings, got %s", path, yamlKind(p))
			}
			fs.Set("peer", s)
		}
		return nil
	}
	list, err := str("peerList")
	if err != nil || list == "" {
		return err
	}
	if !strings.Contains(list, "://") && !strings.HasPrefix(list, "file:") && !filepath.IsAbs(list) {
		list = filepath.Join(filepath.Dir(path), list)
	}
	return fs.Set("peer-list", list)
}

// render fills a template's request: in every string (a map's keys
// too), ${NAME} becomes -A's value of NAME, or its DEFAULT in
// ${NAME:DEFAULT}. A string that changed is read as YAML, so that a
// number stays a number; only true and false (as Go spells booleans) are
// booleans, not YAML's yes and no.
func render(v any, vars map[string]string) (any, error) {
	switch v := v.(type) {
	case string:
		s, err := renderString(v, vars)
		if err != nil || s == v || s == "" {
			return s, err
		}
		var out any
		if err := yaml.Unmarshal([]byte(s), &out); err != nil {
			return s, nil // not YAML: the text itself
		}
		if _, isBool := out.(bool); isBool {
			if _, err := strconv.ParseBool(s); err != nil {
				return s, nil
			}
		}
		return jsonable(out), nil
	case map[string]any:
		m := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) { // so that an error names the same variable every time
			e := v[k]
			nk, err := renderString(k, vars)
			if err != nil {
				return nil, err
			}
			if m[nk], err = render(e, vars); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			var err error
			if l[i], err = render(e, vars); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return v, nil
}

// renderString replaces each ${NAME} and ${NAME:DEFAULT} of s.
func renderString(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("%q: ${ without its }", s)
		}
		b.WriteString(s[:i])
		name, def, hasDef := strings.Cut(s[i+2:i+j], ":")
		switch v, ok := vars[name]; {
		case name == "":
			return "", fmt.Errorf("%q: ${} names no argument", s)
		case ok:
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("${%s} has no value and no default: give -A %s:VALUE", name, name)
		}
		s = s[i+j+1:]
	}
}
