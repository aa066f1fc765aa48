package dns_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/discovery/dns"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  dns.Target
		canon string
	}{
		{"dns:///kv.example:4040", dns.Target{Host: "kv.example", Port: "4040"}, "dns:///kv.example:4040"},
		{"dns:///kv.example.:4040", dns.Target{Host: "kv.example.", Port: "4040"}, "dns:///kv.example.:4040"},
		{"dns://10.0.0.2/kv.example:4040", dns.Target{Server: "10.0.0.2:53", Host: "kv.example", Port: "4040"}, "dns://10.0.0.2:53/kv.example:4040"},
		{"dns://10.0.0.2:5353/kv.example:4040", dns.Target{Server: "10.0.0.2:5353", Host: "kv.example", Port: "4040"}, "dns://10.0.0.2:5353/kv.example:4040"},
		{"dns://[::1]:5353/kv.example:4040", dns.Target{Server: "[::1]:5353", Host: "kv.example", Port: "4040"}, "dns://[::1]:5353/kv.example:4040"},
		{"dns://::1/kv.example:4040", dns.Target{Server: "[::1]:53", Host: "kv.example", Port: "4040"}, "dns://[::1]:53/kv.example:4040"},
		{"dns://ns1.example/kv.example:4040", dns.Target{Server: "ns1.example:53", Host: "kv.example", Port: "4040"}, "dns://ns1.example:53/kv.example:4040"},
		{"dns:///_kv._tcp.example.", dns.Target{Host: "_kv._tcp.example."}, "dns:///_kv._tcp.example."},
		{"dns:///[2001:db8::1]:4040", dns.Target{Host: "2001:db8::1", Port: "4040"}, "dns:///[2001:db8::1]:4040"},
		{"dns:///10.0.0.7:4040", dns.Target{Host: "10.0.0.7", Port: "4040"}, "dns:///10.0.0.7:4040"},
		{"DNS:kv.example:4040", dns.Target{Host: "kv.example", Port: "4040"}, "dns:///kv.example:4040"},
	} {
		got, err := dns.ParseTarget(tc.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want || got.String() != tc.canon || got.SRV() != (tc.want.Port == "") {
			t.Errorf("ParseTarget(%q) = %+v (%s), want %+v (%s)", tc.in, got, got, tc.want, tc.canon)
		}
	}
}

func TestParseTargetErrors(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "required"},
		{"kv.example:4040", "must start with dns:"},
		{"etcd://127.0.0.1:2379/services/kv", "must start with dns:"},
		{"dns://10.0.0.2", "no name after the DNS server"},
		{"dns:///", "no name to look up"},
		{"dns:", "no name to look up"},
		{"dns:///kv.example:http", `port "http" is not a number`},
		{"dns:///kv.example:0", `port "0" is not a number`},
		{"dns:///kv.example:", `port "" is not a number`},
		{"dns:///10.0.0.1", "IP address 10.0.0.1 has no port"},
		{"dns:///[::1]", "IP address [::1] has no port"},
		{"dns:///kv..example:4040", "label that is empty"},
		{"dns:///kv example:4040", "holds ' '"},
		{"dns:///" + strings.Repeat("a", 64) + ".example", "longer than 63"},
		{"dns://10.0.0.2:99999/kv.example:4040", `DNS server "10.0.0.2:99999"`},
		{"dns://a:b:c/kv.example:4040", `DNS server "a:b:c" is not host or host:port`},
	} {
		_, err := dns.ParseTarget(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "write dns:///kv.example:4040") {
			t.Errorf("ParseTarget(%q) = %v, want an error saying %q and showing a valid target", tc.in, err, tc.why)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  dns.Config
		want string
	}{
		{dns.Config{}, `dns: Config.Target is "", must be a DNS target (empty, it is required); write dns:///`},
		{dns.Config{Target: "dns:///kv:1", Period: -time.Second}, "dns: Config.Period is -1s, must be >= 0 (0 means the default, 30s)"},
		{dns.Config{Target: "dns:///kv:1", MinInterval: -1}, "dns: Config.MinInterval is -1ns, must be >= 0 (0 means the default, 5s)"},
		{dns.Config{Target: "dns:///kv:1", Timeout: -1}, "dns: Config.Timeout is -1ns, must be >= 0 (0 means the default, 5s)"},
		{dns.Config{Target: "dns://10.0.0.2/kv:1", Resolver: &net.Resolver{}}, "set one or the other (dns:///kv:1 asks the Resolver)"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
		if _, nerr := dns.New(tc.cfg); nerr == nil || err == nil || nerr.Error() != err.Error() {
			t.Errorf("New(%+v) = %v, want Validate's error", tc.cfg, nerr)
		}
	}
	if err := (dns.Config{Target: "dns:///kv.example:4040", Period: time.Second, MinInterval: time.Minute}).Validate(); err != nil {
		t.Errorf("a MinInterval above Period is capped, not refused: %v", err)
	}
}
