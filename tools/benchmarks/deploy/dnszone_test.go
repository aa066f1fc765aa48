package deploy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// The zone lists an SRV record per instance added, each naming a host
// whose A record is 127.0.0.1, and forgets both once it is removed.
func TestZone(t *testing.T) {
	z, err := startZone()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := z.close(); err != nil {
			t.Error(err)
		}
	}()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, z.addr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, hp := range []string{"127.0.0.1:4040", "127.0.0.1:4041"} {
		if err := z.add(hp); err != nil {
			t.Fatal(err)
		}
	}
	_, srvs, err := r.LookupSRV(ctx, "", "", srvName)
	if err != nil || len(srvs) != 2 {
		t.Fatalf("SRV %s: %v, %v; want 2 records", srvName, srvs, err)
	}
	ips, err := r.LookupHost(ctx, hostName(4040))
	if err != nil || len(ips) != 1 || ips[0] != "127.0.0.1" {
		t.Fatalf("host %s: %v, %v; want 127.0.0.1", hostName(4040), ips, err)
	}
	z.remove("127.0.0.1:4040")
	_, srvs, err = r.LookupSRV(ctx, "", "", srvName)
	if err != nil || len(srvs) != 1 || srvs[0].Port != 4041 || srvs[0].Target != hostName(4041) {
		t.Fatalf("SRV after a removal: %v, %v; want the record of port 4041", srvs, err)
	}
	var dnsErr *net.DNSError
	if _, err := r.LookupHost(ctx, hostName(4040)); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("the removed host: %v, want not found", err)
	}
	if err := z.add("10.0.0.1:4040"); err == nil {
		t.Error("added an instance off 127.0.0.1")
	}
	if z.target() != "dns://"+z.addr+"/"+srvName {
		t.Errorf("target %q", z.target())
	}
}
