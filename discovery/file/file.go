// Package file finds a service's peers in a file, and follows the file as
// it changes: a deploy tool, a ConfigMap mounted as a volume, or an
// operator rewrites it, and the Channel's peers follow within a second.
//
// The file lists the peers in one of yab's peer-list shapes, as sluice's
// -P/--peer-list reads them:
//
//   - one peer a line, "host:port", optionally followed by a weight
//     ("10.0.0.7:4040 3"); blank lines and # comments are ignored;
//   - a JSON array of "host:port" strings or of {"hostPort": "...",
//     "weight": N} objects;
//   - a YAML list of the same.
//
// A file that cannot be read or parsed is a failure, reported to the
// Channel's Client, which keeps the last good set (a half-written file never
// empties the peer list). Write the file whole and rename it into place to
// avoid the failure altogether.
package file

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rpc/sluice/balance"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/hostport"
	"github.com/sluice-rpc/sluice/internal/localfile"
)

// DefaultPeriod is how often a Resolver reads its file again, when
// Config.Period is zero. Reading a list of peers a second costs next to
// nothing, and comparing contents (not modification times) sees every
// change, however quick.
const DefaultPeriod = time.Second

// MaxFileSize is the most a file of peers may hold: 4 MiB, four times
// what discovery.DefaultMaxPeers peers take in the longest shape. The file
// is read as untrusted input: one larger, or one that is not a regular
// file (a named pipe, a device), is a failure naming it, found without
// reading it whole or waiting on it.
const MaxFileSize = 4 << 20

// Config configures a Resolver. Path is required; the other zero fields
// mean the defaults.
type Config struct {
	// Path is the file's path.
	Path string
	// Period is how often the file is read again; its peers are reported
	// when its content changed. 0 means DefaultPeriod.
	Period time.Duration
	// Clock times the checks; nil means clock.Real.
	Clock clock.Clock
}

// Validate reports the first rule c breaks, as a *retry.FieldError, or
// nil.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return config.Errorf("file", "Config.Path", c.Path, "must name the file of peers")
	case c.Period < 0:
		return config.Errorf("file", "Config.Period", c.Period, "must be >= 0 (0 means the default, %v)", DefaultPeriod)
	}
	return nil
}

// Resolver reports the peers of a file, again each time it changes. Make
// one with New.
type Resolver struct{ cfg Config }

// New returns a Resolver of the file cfg names, or cfg's validation error.
// The file is not read until the Resolver runs.
func New(cfg Config) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Period = cmp.Or(cfg.Period, DefaultPeriod)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	return &Resolver{cfg}, nil
}

// String returns "file:" and the path.
func (r *Resolver) String() string { return "file:" + r.cfg.Path }

// Resolve reads the file and reports its peers, then reads it every
// Period and reports them again when its content changed, until ctx ends.
// A failure (a missing or unreadable file, a list that does not parse) is
// reported each time it is seen. ResolveNow requests read it at once.
func (r *Resolver) Resolve(ctx context.Context, u discovery.Updates) {
	var last []byte // the content last reported, nil after a failure
	read := func(force bool) {
		data, err := localfile.Read(r.cfg.Path, MaxFileSize, "a file of peers")
		if err != nil {
			last = nil
			u.Error(fmt.Errorf("file: %v", err))
			return
		}
		if !force && last != nil && bytes.Equal(data, last) {
			return
		}
		addrs, err := Parse(data)
		if err != nil {
			last = nil
			u.Error(fmt.Errorf("file: %s: %v", r.cfg.Path, err))
			return
		}
		last = data
		u.Update(addrs)
	}
	read(true)
	for {
		t := r.cfg.Clock.NewTimer(r.cfg.Period)
		select {
		case <-t.C():
			read(false)
		case <-u.ResolveNow():
			t.Stop()
			read(true)
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// Parse reads a peer list in any of the package's shapes. A file whose
// every line is a peer or a comment is the line shape (an IPv6 line such
// as "[::1]:4040" looks like a JSON array); any other is read as YAML, of
// which JSON is a subset, so that an error names the entry's line either
// way. An empty list is an error.
func Parse(data []byte) ([]discovery.Address, error) {
	addrs, lineErr := parseLines(data)
	if lineErr == nil {
		return addrs, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, lineErr
	}
	addrs = nil
	for _, n := range doc.Content[0].Content {
		a, err := parseEntry(n)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n.Line, err)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, errors.New("the list is empty")
	}
	return addrs, nil
}

// parseEntry reads one entry of a JSON or YAML list: a "host:port" string
// or a {hostPort, weight} mapping.
func parseEntry(n *yaml.Node) (discovery.Address, error) {
	const want = `want a "host:port" string or {"hostPort": "host:port", "weight": N}`
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		return discovery.Address{HostPort: n.Value}, hostport.Validate(n.Value)
	case n.Kind != yaml.MappingNode:
		return discovery.Address{}, errors.New(want)
	}
	var e struct {
		HostPort string   `yaml:"hostPort"`
		Weight   *float64 `yaml:"weight"`
	}
	if err := n.Decode(&e); err != nil {
		return discovery.Address{}, fmt.Errorf("%v; %s", err, want)
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "hostPort" && k != "weight" {
			return discovery.Address{}, fmt.Errorf("unknown field %q; %s", k, want)
		}
	}
	if err := hostport.Validate(e.HostPort); err != nil {
		return discovery.Address{}, err
	}
	a := discovery.Address{HostPort: e.HostPort}
	if e.Weight != nil {
		if err := checkWeight(*e.Weight); err != nil {
			return discovery.Address{}, err
		}
		a.Weight = *e.Weight
	}
	return a, nil
}

// checkWeight is balancing.CheckWeight, which every client applies, but
// for 0: a file that gives a weight gives one (leave it out for 1).
func checkWeight(w float64) error {
	if w == 0 || balancing.CheckWeight(w) != nil {
		return fmt.Errorf("weight %v, must be a number in [%g, %g] (leave it out for 1)", w, balance.MinWeight, balance.MaxWeight)
	}
	return nil
}

// parseLines reads one peer a line, each optionally followed by its
// weight.
func parseLines(data []byte) ([]discovery.Address, error) {
	var addrs []discovery.Address
	for i, line := range bytes.Split(data, []byte("\n")) {
		s, _, _ := strings.Cut(string(line), "#")
		fields := strings.Fields(s)
		if len(fields) == 0 {
			continue
		}
		if len(fields) > 2 {
			return nil, fmt.Errorf("line %d: want \"host:port\" or \"host:port weight\", got %d fields", i+1, len(fields))
		}
		if err := hostport.Validate(fields[0]); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		a := discovery.Address{HostPort: fields[0]}
		if len(fields) == 2 {
			w, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: weight %q is not a number", i+1, fields[1])
			}
			if err := checkWeight(w); err != nil {
				return nil, fmt.Errorf("line %d: %v", i+1, err)
			}
			a.Weight = w
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no peers in the file")
	}
	return addrs, nil
}
