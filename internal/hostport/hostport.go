// Package hostport checks a peer's host:port: peer.ValidateHostPort, in a
// package that imports nothing but the standard library, so that discovery
// checks what registries answer without linking tchannel-go.
package hostport

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Validate checks that hostPort is host:port with a numeric port in
// 1..65535 and a host that is an IP address or a DNS host name (such as
// localhost). It rejects spaces, an empty host, and a dotted-decimal host
// that is not an IPv4 address ("999.999.999.999"). Its errors start
// "peer: bad host:port", as peer.ValidateHostPort's, whichever calls it.
func Validate(hostPort string) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("peer: bad host:port %q: %v", hostPort, err)
	}
	if host == "" {
		return fmt.Errorf("peer: bad host:port %q: the host is empty", hostPort)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port[0] == '+' {
		return fmt.Errorf("peer: bad host:port %q: port must be a number in 1..65535", hostPort)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if why := badHostName(host); why != "" {
		return fmt.Errorf("peer: bad host:port %q: host %q is neither an IP address nor a host name: %s", hostPort, host, why)
	}
	return nil
}

// badHostName says what keeps host from being a DNS host name (RFC 1123:
// dot-separated labels of letters, digits and hyphens, 1..63 bytes each and
// not starting or ending with a hyphen, 253 bytes in all, the last label
// not all digits), or "" if nothing does.
func badHostName(host string) string {
	if len(host) > 253 {
		return "longer than 253 bytes"
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for _, l := range labels {
		switch {
		case l == "":
			return "an empty label"
		case len(l) > 63:
			return "a label longer than 63 bytes"
		case l[0] == '-' || l[len(l)-1] == '-':
			return "a label starts or ends with a hyphen"
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return fmt.Sprintf("character %q is not allowed", c)
			}
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return "it looks like an IPv4 address but is not one"
	}
	return ""
}
