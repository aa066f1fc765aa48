package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -p and -P give the peers (a file with -p is read once; a registry does
// not mix with -p); a -P target that names nothing (a missing file, a
// malformed dns: or etcd: target) is an error naming the flag.
func TestPeerSource(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "peers")
	if err := os.WriteFile(list, []byte("127.0.0.1:4040\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    peerFlags
		want string // "" for success; then the source's String
	}{
		{peerFlags{peers: multiFlag{"127.0.0.1:4040"}}, ""},
		{peerFlags{list: list}, ""},
		{peerFlags{list: "file:" + list}, ""},
		{peerFlags{list: "dns:///kv.example:4040"}, ""},
		{peerFlags{peers: multiFlag{"127.0.0.1:4041"}, list: list}, ""}, // read once, joined
		{peerFlags{peers: multiFlag{"127.0.0.1:4041"}, list: "dns:///kv.example:4040"}, "-p/--peer and -P/--peer-list dns:///kv.example:4040 do not mix"},
		{peerFlags{peers: multiFlag{"nohost"}}, `--peer: peer: bad host:port "nohost"`},
		{peerFlags{list: filepath.Join(dir, "missing")}, "--peer-list: open " + filepath.Join(dir, "missing") + ": no such file"},
		{peerFlags{list: "dns:///kv.example"}, ""}, // a name without a port: SRV
		{peerFlags{list: "dns://bad server/kv:1"}, "--peer-list: dns:"},
		{peerFlags{list: "etcd://127.0.0.1:2379/kv"}, "--peer-list: an etcd:// target is in sluice-lab"}, // sluice's
	} {
		tc.p.etcd = &EtcdFlags{}
		src, err := tc.p.source()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.p, err)
				continue
			}
			src.close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.p, err, tc.want)
		}
	}
}

// The etcd flags: a certificate without its key, and a CA file that holds
// no certificate, are errors naming the flags.
func TestEtcdTLSFlags(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&EtcdFlags{cert: "c.pem"}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "--etcd-cert and --etcd-key go together") {
		t.Errorf("cert without key: %v", err)
	}
	if _, err := (&EtcdFlags{cacert: notPEM}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without PEM: %v", err)
	}
}
