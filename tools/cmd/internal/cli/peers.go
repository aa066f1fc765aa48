package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/discovery"
	"github.com/sluice-rpc/sluice/discovery/file"
	"github.com/sluice-rpc/sluice/internal/localfile"
	"github.com/sluice-rpc/sluice/peer"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// peerFlags are yab's -p/--peer and -P/--peer-list, shared by call and
// bench, with the etcd client's flags for etcd:// peer lists.
type peerFlags struct {
	peers multiFlag
	list  string
	etcd  *EtcdFlags
}

func addPeerFlags(fs *FlagSet, lab *Lab) *peerFlags {
	p := &peerFlags{}
	fs.Var(&p.peers, "peer", "`HOST:PORT` of a peer (repeatable)")
	fs.alias("p", "peer")
	fs.StringVar(&p.list, "peer-list", "", "where the peers are, followed as they change: a `TARGET`, FILE, file:FILE, dns:///HOST:PORT, dns:///SRV-NAME or etcd://HOST:PORT/PREFIX (see below)")
	fs.alias("P", "peer-list")
	p.etcd = addEtcdFlags(fs, lab)
	return p
}

// peerSource is where a command's peers come from: host:ports, or a
// resolver following a target.
type peerSource struct {
	hostPorts []string
	resolver  discovery.Resolver
	// listed are the peers a followed file held at the start, checked
	// as the command line's are.
	listed []string
	close  func() // closes what the resolver needs (an etcd client)
}

// source returns the peers of --peer and --peer-list; an error names the
// flag and, for a file, the line. A file given alone is followed as it
// changes; with --peer it is read once and its peers join theirs. A dns:
// or etcd: target is followed, and does not mix with --peer.
func (p *peerFlags) source() (*peerSource, error) {
	s := &peerSource{close: func() {}}
	for _, hp := range p.peers {
		if err := peer.ValidateHostPort(hp); err != nil {
			return nil, fmt.Errorf("--peer: %v", err)
		}
	}
	s.hostPorts = slices.Clone(p.peers)
	if p.list == "" {
		return s, nil
	}
	if strings.HasPrefix(p.list, "dns:") || strings.HasPrefix(p.list, "etcd:") {
		if len(p.peers) > 0 {
			return nil, fmt.Errorf("-p/--peer and -P/--peer-list %s do not mix: a registry's peers are its own to change", p.list)
		}
		r, closeFn, err := resolverFor(p.list, p.etcd)
		if err != nil {
			return nil, fmt.Errorf("--peer-list: %v", err)
		}
		s.resolver, s.close = r, closeFn
		return s, nil
	}
	// A file is read now, so that a typo or a bad line is a usage error at
	// once, not calls waiting for peers that never come.
	path := strings.TrimPrefix(p.list, "file:")
	data, err := localfile.Read(path, file.MaxFileSize, "a file of peers")
	if err != nil {
		return nil, fmt.Errorf("--peer-list: %v", err)
	}
	addrs, err := file.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--peer-list %s: %v", path, err)
	}
	for _, a := range addrs {
		s.listed = append(s.listed, a.HostPort)
	}
	if len(p.peers) > 0 {
		s.hostPorts, s.listed = append(s.hostPorts, s.listed...), nil
		return s, nil
	}
	if s.resolver, err = file.New(file.Config{Path: path}); err != nil {
		return nil, fmt.Errorf("--peer-list: %v", err)
	}
	return s, nil
}

// empty reports whether no peer was given.
func (s *peerSource) empty() bool { return len(s.hostPorts) == 0 && s.resolver == nil }

// client makes a Channel named name with opts, and its Client of tg's
// service with these peers; close closes the Channel. Naming tg's method
// (channel.WithMethods) warns at once of a service config naming it wrongly.
// Its requests are bounded by maxBodyFile, as the bodies it reads are.
func (s *peerSource) client(name string, tg *target, opts ...channel.Option) (cl *channel.Client, close func(), err error) {
	ch, err := channel.New(name, append([]channel.Option{channel.WithMaxRequestSize(maxBodyFile)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	copts := []channel.ClientOption{channel.WithMethods(tg.method)}
	if s.resolver != nil {
		copts = append(copts, channel.WithResolver(s.resolver))
	}
	if cl, err = ch.NewClient(tg.service, copts...); err == nil {
		for _, hp := range s.hostPorts {
			if err = cl.AddPeer(hp); err != nil {
				break
			}
		}
	}
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	return cl, ch.Close, nil
}

// String names the peers, for a report.
func (s *peerSource) String() string {
	if s.resolver != nil {
		return s.resolver.String()
	}
	return strings.Join(s.hostPorts, " ")
}
