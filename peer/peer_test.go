package peer

import (
	"strings"
	"testing"
)

func TestValidateHostPort(t *testing.T) {
	for _, bad := range []string{"", "localhost", ":80", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:http", "127.0.0.1:+80",
		" 127.0.0.1:80", "127.0.0.1 :80", "999.999.999.999:80", "1.2.3:80", "host_name:80", "-host:80", "a..b:80",
		"[::1%]:80", strings.Repeat("a", 64) + ".com:80", "exa mple.com:80", "\x00:80"} {
		if err := ValidateHostPort(bad); err == nil {
			t.Errorf("ValidateHostPort(%q) accepted", bad)
		}
	}
	for _, good := range []string{"127.0.0.1:4040", "localhost:80", "localhost.:80", "my-host.example.com:443", "[::1]:80",
		"10.0.0.1:65535", "xn--bcher-kva.example:80", "1host:80"} {
		if err := ValidateHostPort(good); err != nil {
			t.Error(err)
		}
	}
	if err := ValidateHostPort("999.999.999.999:80"); err == nil || !strings.Contains(err.Error(), "looks like an IPv4 address but is not one") {
		t.Errorf("error does not say what is wrong: %v", err)
	}
}
