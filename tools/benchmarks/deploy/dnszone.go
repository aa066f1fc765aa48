package deploy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	mdns "github.com/miekg/dns"
)

// srvName is the name whose SRV records list RowDNS's fleet.
const srvName = "_kv._tcp.fleet.test."

// zone is a DNS server on 127.0.0.1, UDP and TCP on one port, answering
// an SRV record of srvName per instance, each naming a host of its own,
// hostName(port), whose A record is 127.0.0.1; TTL 0, else NXDOMAIN.
type zone struct {
	addr    string
	servers []*mdns.Server
	served  chan error

	mu    sync.Mutex
	hosts map[string]uint16 // hostName(port): port
}

// startZone starts the server with no instance listed.
func startZone() (*zone, error) {
	z := &zone{hosts: map[string]uint16{}, served: make(chan error, 2)}
	var pc net.PacketConn
	var l net.Listener
	for try := 0; ; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("deploy: DNS server: %w", err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if try == 10 {
			return nil, fmt.Errorf("deploy: DNS server: no port free for both UDP and TCP: %w", err)
		}
	}
	z.addr = pc.LocalAddr().String()
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: z}, {Listener: l, Handler: z}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { z.served <- srv.ActivateAndServe() }()
		select { // unbounded: on open sockets it notifies or fails before it reads
		case <-started:
			z.servers = append(z.servers, srv)
		case err := <-z.served:
			z.close()
			return nil, fmt.Errorf("deploy: DNS server: %w", err)
		}
	}
	return z, nil
}

// target is the discovery/dns target of the fleet's records.
func (z *zone) target() string { return "dns://" + z.addr + "/" + srvName }

// hostName is the name the SRV record of the instance on port names.
func hostName(port uint16) string { return fmt.Sprintf("i-%d.fleet.test.", port) }

// add lists the instance at hostPort (on 127.0.0.1).
func (z *zone) add(hostPort string) error {
	ap, err := netip.ParseAddrPort(hostPort)
	if err != nil || ap.Addr() != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		return fmt.Errorf("deploy: DNS record for %q: the zone lists 127.0.0.1:PORT only", hostPort)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.hosts[hostName(ap.Port())] = ap.Port()
	return nil
}

// remove takes the instance at hostPort off the list.
func (z *zone) remove(hostPort string) {
	if ap, err := netip.ParseAddrPort(hostPort); err == nil {
		z.mu.Lock()
		defer z.mu.Unlock()
		delete(z.hosts, hostName(ap.Port()))
	}
}

// ServeDNS answers one query from the zone.
func (z *zone) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	m := new(mdns.Msg)
	m.SetReply(req)
	// Authoritative, or Go's resolver takes an empty answer for a lame
	// referral.
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = mdns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	hdr := mdns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: mdns.ClassINET, Ttl: 0}
	z.mu.Lock()
	defer z.mu.Unlock()
	_, isHost := z.hosts[name]
	switch {
	case name == srvName:
		for host, p := range z.hosts {
			if q.Qtype == mdns.TypeSRV {
				m.Answer = append(m.Answer, &mdns.SRV{Hdr: hdr, Priority: 0, Weight: 10, Port: p, Target: host})
			}
		}
	case isHost:
		if q.Qtype == mdns.TypeA {
			m.Answer = append(m.Answer, &mdns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 1)})
		}
	default:
		m.Rcode = mdns.RcodeNameError
	}
	w.WriteMsg(m)
}

// close stops the server and waits for it.
func (z *zone) close() error {
	var errs []error
	for _, srv := range z.servers {
		errs = append(errs, srv.Shutdown())
	}
	for range z.servers {
		<-z.served
	}
	z.servers = nil
	return errors.Join(errs...)
}
