package tlsfiles_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// A certificate replaced on disk is presented to the handshakes after
// Reload, while a connection made before keeps working with the old one.
// Without Reload (and with the looks from handshakes off) nothing
// changes.
func TestReloadPresentsNewCertificate(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}, NoReload: true})
	srv := serve(t, serverConfig(t, r))
	client := mustClientConfig(t, tlsfiles.Files{CA: s.CA.File})

	before := mustDial(t, srv.addr, client)
	presented(t, before, s.Server.Leaf, "before the replacement")

	next := s.CA.Issue(t, testcerts.Loopback("next server"))
	next.WriteTo(t, s.Server.Cert, s.Server.Key)
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "replaced, not reloaded")

	if err := r.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	presented(t, mustDial(t, srv.addr, client), next.Leaf, "after Reload")
	if err := echo(before); err != nil {
		t.Errorf("the connection made before the reload: %v", err)
	}
	presented(t, before, s.Server.Leaf, "the connection made before the reload")
}

// On a fake clock: a handshake within ReloadInterval of the last look
// uses the files as loaded; the first one after it reads the replaced
// files and presents the new certificate.
func TestReloadAfterInterval(t *testing.T) {
	s := testcerts.New(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}, Clock: clk})
	srv := serve(t, serverConfig(t, r))
	client := mustClientConfig(t, tlsfiles.Files{CA: s.CA.File})

	next := s.CA.Issue(t, testcerts.Loopback("next server"))
	next.WriteTo(t, s.Server.Cert, s.Server.Key)
	clk.Add(tlsfiles.DefaultReloadInterval - time.Nanosecond)
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "within the interval")
	clk.Add(time.Nanosecond)
	presented(t, mustDial(t, srv.addr, client), next.Leaf, "once the interval is over")
}

// On the wall clock, with a short interval, handshakes pick up a replaced
// certificate by themselves.
func TestReloadByItself(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}, ReloadInterval: time.Millisecond})
	srv := serve(t, serverConfig(t, r))
	client := mustClientConfig(t, tlsfiles.Files{CA: s.CA.File})
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "before the replacement")

	next := s.CA.Issue(t, testcerts.Loopback("next server"))
	next.WriteTo(t, s.Server.Cert, s.Server.Key)
	testwait.Until(t, "a handshake presenting the new certificate", func() bool {
		return serial(mustDial(t, srv.addr, client)).Cmp(next.Leaf.SerialNumber) == 0
	})
}

// A replacement that does not load leaves the last good certificate in
// use; handshakes go on with it, and the error is reported once and kept
// until a good replacement loads.
func TestInvalidReplacementKeepsCertificate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, s testcerts.Set, next testcerts.Pair)
		want    string
	}{
		{"a half-written certificate", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			testcerts.Write(t, s.Server.Cert, next.CertPEM[:len(next.CertPEM)/2])
		}, `certificate "` + "CERT" + `" ends in an incomplete PEM block`},
		{"a half-written key", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			testcerts.Write(t, s.Server.Cert, next.CertPEM)
			testcerts.Write(t, s.Server.Key, next.KeyPEM[:len(next.KeyPEM)/2])
		}, "tls: failed to find any PEM data in key input"},
		{"a new certificate beside the old key", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			testcerts.Write(t, s.Server.Cert, next.CertPEM)
		}, "tls: private key does not match public key"},
		{"a key only", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			testcerts.Write(t, s.Server.Key, next.KeyPEM)
		}, "tls: private key does not match public key"},
		{"an empty certificate", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			testcerts.Write(t, s.Server.Cert, nil)
		}, "tls: failed to find any PEM data in certificate input"},
		{"a missing certificate", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			if err := os.Remove(s.Server.Cert); err != nil {
				t.Fatal(err)
			}
		}, "reading certificate: open CERT: no such file or directory"},
		{"an expired certificate", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			l := testcerts.Loopback("expired server")
			l.NotBefore, l.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
			s.CA.Issue(t, l).WriteTo(t, s.Server.Cert, s.Server.Key)
		}, `certificate "CERT" expired at `},
		{"a chain of 17 certificates", func(t *testing.T, s testcerts.Set, next testcerts.Pair) {
			chain := slices.Concat(next.CertPEM, bytes.Repeat(s.CA.PEM, tlsfiles.MaxChainCerts))
			testcerts.Write(t, s.Server.Cert, chain)
			testcerts.Write(t, s.Server.Key, next.KeyPEM)
		}, `certificate "CERT" holds a chain of 17 certificates, more than 16 (MaxChainCerts)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testcerts.New(t)
			want := strings.ReplaceAll(tc.want, "CERT", s.Server.Cert)
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			var log errorLog
			r := newReloader(t, tlsfiles.Config{
				Files:  tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File},
				Clock:  clk,
				Logger: log.logger(),
			})
			srv := serve(t, serverConfig(t, r))
			client := mustClientConfig(t, tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File})
			next := s.CA.Issue(t, testcerts.Loopback("next server"))

			tc.replace(t, s, next)
			clk.Add(time.Second)
			presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "after the bad replacement")
			if errs := log.get(); len(errs) != 1 || !strings.Contains(errs[0].Error(), want) ||
				!strings.HasPrefix(errs[0].Error(), "tlsfiles: still presenting the certificate loaded before: ") {
				t.Errorf("reported %v, want one error containing %q", errs, want)
			}
			if err := r.LastError(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("LastError is %v, want one containing %q", err, want)
			}
			// Unchanged since, the files are not reported again.
			clk.Add(time.Second)
			presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "a second after the bad replacement")
			if errs := log.get(); len(errs) != 1 {
				t.Errorf("reported %d errors for one bad replacement: %v", len(errs), errs)
			}
			// Reload reads them anyway, and says why they do not load.
			if err := r.Reload(); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Reload: %v, want an error containing %q", err, want)
			}

			next.WriteTo(t, s.Server.Cert, s.Server.Key)
			clk.Add(time.Second)
			presented(t, mustDial(t, srv.addr, client), next.Leaf, "after the good replacement")
			if err := r.LastError(); err != nil {
				t.Errorf("LastError after the good replacement: %v", err)
			}
		})
	}
}

// A CA replaced on disk verifies the clients of the handshakes after the
// reload: clients of the new CA are served, those of the old refused. A
// CA file that does not load leaves the last good CA in use.
func TestServerReloadsCA(t *testing.T) {
	s := testcerts.New(t)
	var log errorLog
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}, NoReload: true, Logger: log.logger()})
	srv := serve(t, serverConfig(t, r))
	// The clients trust the server (issued by CA) throughout.
	trusted := mustClientConfig(t, tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File})
	other := mustClientConfig(t, tlsfiles.Files{Cert: s.UntrustedClient.Cert, Key: s.UntrustedClient.Key, CA: s.CA.File})
	// served reports whether the server served cfg's client (reading the
	// server's outcome either way).
	served := func(cfg *tls.Config) bool {
		t.Helper()
		_, err := dial(t, srv.addr, cfg)
		h := srv.next(t)
		return err == nil && h.err == nil
	}
	if !served(trusted) || served(other) {
		t.Fatal("before the replacement, the server does not serve its CA's clients only")
	}

	testcerts.Write(t, s.CA.File, []byte("-----BEGIN CERTIFICATE-----\nMIIB"))
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "tlsfiles: still trusting the CA loaded before: ") {
		t.Errorf("Reload of a half-written CA: %v", err)
	}
	if !served(trusted) || served(other) {
		t.Error("after a bad CA file, the server does not keep to the CA loaded before")
	}

	s.Untrusted.WriteTo(t, s.CA.File)
	if err := r.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if served(trusted) || !served(other) {
		t.Error("after the replacement, the server does not serve the new CA's clients only")
	}
	if n := len(log.get()); n != 1 {
		t.Errorf("reported %d errors, want 1 (the half-written CA)", n)
	}
}

// A client that resumes its session after the server's CA was replaced
// is verified against the new CA: resumption is no way around a CA
// rotation.
func TestServerReloadsCAResumption(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			s := testcerts.New(t)
			r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}, NoReload: true})
			srv := serve(t, serverConfig(t, r))
			client := mustClientConfig(t, tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File})
			client.MaxVersion = v.max
			client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			mustDial(t, srv.addr, client)
			srv.next(t)
			if c := mustDial(t, srv.addr, client); !c.ConnectionState().DidResume {
				t.Fatal("the second connection did not resume the first's session")
			}
			if h := srv.next(t); len(h.state.VerifiedChains) == 0 {
				t.Error("a resumed session has no VerifiedChains")
			}

			s.Untrusted.WriteTo(t, s.CA.File)
			if err := r.Reload(); err != nil {
				t.Fatal(err)
			}
			_, err := dial(t, srv.addr, client)
			if h := srv.next(t); err == nil || h.err == nil || !strings.Contains(h.err.Error(), "certificate signed by unknown authority") {
				t.Errorf("after the CA was replaced, a client of the old CA: the client's error %v, the server's %v; want it refused", err, h.err)
			}
		})
	}
}

// A client's configurations made after its CA was replaced verify the
// server against the new CA; one made before keeps the old. The
// certificate a client presents follows its files in every
// configuration.
func TestClientReloads(t *testing.T) {
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File}, NoReload: true})
	srv := serve(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}})))
	early := r.ClientConfig("")

	// The certificate presented.
	mustDial(t, srv.addr, early)
	if id := srv.nextIdentity(t); id.CommonName != testcerts.ClientName {
		t.Errorf("the client presented %q, want %q", id.CommonName, testcerts.ClientName)
	}
	renewed := s.CA.Issue(t, testcerts.Leaf{CommonName: "renewed client", Usage: x509.ExtKeyUsageClientAuth})
	renewed.WriteTo(t, s.Client.Cert, s.Client.Key)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	mustDial(t, srv.addr, early)
	if id := srv.nextIdentity(t); id.CommonName != "renewed client" {
		t.Errorf("after the renewal, a configuration made before presented %q, want %q", id.CommonName, "renewed client")
	}

	// The CA: the server moves to a certificate of the other authority,
	// and the client's CA file follows.
	other := serve(t, serverConfig(t, newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.UntrustedServer.Cert, Key: s.UntrustedServer.Key}})))
	if _, err := dial(t, other.addr, r.ClientConfig("")); err == nil {
		t.Fatal("a server of another authority was trusted before the CA was replaced")
	}
	other.next(t)
	s.Untrusted.WriteTo(t, s.CA.File)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	mustDial(t, other.addr, r.ClientConfig(""))
	other.next(t)
	if _, err := dial(t, other.addr, early); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a configuration made before the CA was replaced: %v, want the old CA's refusal", err)
	}
	other.next(t)
}

// A certificate and key rewritten one after the other, with a look at the
// files in between, never install the mismatched pair: the old one stays
// until the new key is there too.
func TestPairReplacedInTwoSteps(t *testing.T) {
	s := testcerts.New(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var log errorLog
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key}, Clock: clk, Logger: log.logger()})
	srv := serve(t, serverConfig(t, r))
	client := mustClientConfig(t, tlsfiles.Files{CA: s.CA.File})
	next := s.CA.Issue(t, testcerts.Loopback("next server"))

	testcerts.Write(t, s.Server.Cert, next.CertPEM)
	clk.Add(time.Second)
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "with the certificate replaced, not the key")
	testcerts.Write(t, s.Server.Key, next.KeyPEM)
	clk.Add(time.Second)
	presented(t, mustDial(t, srv.addr, client), next.Leaf, "with both replaced")
	if err := r.LastError(); err != nil {
		t.Errorf("LastError: %v", err)
	}
	if errs := log.get(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "private key does not match public key") {
		t.Errorf("reported %v, want the mismatch once", errs)
	}
}

// The look a handshake makes for the current configuration: a try-lock
// and a clock reading between two looks at the files, no allocation.
func BenchmarkGetConfigForClient(b *testing.B) {
	s := testcerts.New(b)
	r, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}})
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := r.ServerConfig()
	if err != nil {
		b.Fatal(err)
	}
	hello := &tls.ClientHelloInfo{}
	b.ReportAllocs()
	for b.Loop() {
		if c, err := cfg.GetConfigForClient(hello); err != nil || c == nil {
			b.Fatal(c, err)
		}
	}
}

// A certificate file holding a chain longer than MaxChainCerts is an
// error at New, naming the file and the limit; a chain of MaxChainCerts
// loads.
func TestNewRefusesLongChains(t *testing.T) {
	s := testcerts.New(t)
	file := s.Server.Cert
	testcerts.Write(t, file, slices.Concat(s.Server.CertPEM, bytes.Repeat(s.CA.PEM, tlsfiles.MaxChainCerts-1)))
	if _, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Cert: file, Key: s.Server.Key}}); err != nil {
		t.Errorf("New with a chain of %d certificates: %v", tlsfiles.MaxChainCerts, err)
	}
	testcerts.Write(t, file, slices.Concat(s.Server.CertPEM, bytes.Repeat(s.CA.PEM, 1500)))
	_, err := tlsfiles.New(tlsfiles.Config{Files: tlsfiles.Files{Cert: file, Key: s.Server.Key}})
	want := fmt.Sprintf("tlsfiles: certificate %q holds a chain of 1501 certificates, more than 16 (MaxChainCerts)", file)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New with a chain of 1501 certificates: %v, want %q", err, want)
	}
}

// With no Logger, a file that changed and does not load is logged on
// slog.Default() at Warn.
func TestReloadErrorGoesToSlogDefault(t *testing.T) {
	var log errorLog
	prev := slog.Default()
	slog.SetDefault(log.logger())
	defer slog.SetDefault(prev)
	s := testcerts.New(t)
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}, NoReload: true})
	testcerts.Write(t, s.CA.File, []byte("-----BEGIN CERTIFICATE-----\nMIIB"))
	if err := r.Reload(); err == nil {
		t.Fatal("Reload of a half-written CA returned nil")
	}
	if errs := log.get(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "still trusting the CA loaded before") {
		t.Errorf("slog.Default() got %v, want the CA's error once", errs)
	}
}
