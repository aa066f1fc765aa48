package tlsfiles_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// maxFileSize is tlsfiles' limit on a file's size: 1 MiB.
const maxFileSize = 1 << 20

// within returns what f returns, failing the test if f does not return
// within testwait.Limit (it blocked on a file, say).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	return testwait.Recv(t, done, what)
}

// A certificate, key or CA larger than 1 MiB is refused, naming the file
// and the limit, at start-up and when it replaces a good one; a file of 1
// MiB exactly is read.
func TestFileTooLarge(t *testing.T) {
	s := testcerts.New(t)
	padded := func(pem []byte, size int) []byte {
		return append(bytes.Clone(pem), bytes.Repeat([]byte("\n"), size-len(pem))...)
	}
	testcerts.Write(t, s.CA.File, padded(s.CA.PEM, maxFileSize))
	testcerts.Write(t, s.Server.Cert, padded(s.Server.CertPEM, maxFileSize))
	files := tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var log errorLog
	r := newReloader(t, tlsfiles.Config{Files: files, Clock: clk, Logger: log.logger()})
	srv := serve(t, serverConfig(t, r))
	client := mustClientConfig(t, tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File})
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "files of 1 MiB exactly")

	tooLarge := func(file string) string {
		return fmt.Sprintf("%q is larger than %d bytes (1 MiB)", file, maxFileSize)
	}
	for _, tc := range []struct {
		name string
		f    tlsfiles.Files
		want string
	}{
		{"certificate", tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key}, "tlsfiles: reading certificate: " + tooLarge(s.Client.Cert)},
		{"key", tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key}, "tlsfiles: reading key: " + tooLarge(s.Client.Key)},
		{"CA", tlsfiles.Files{CA: s.Untrusted.File}, "tlsfiles: reading CA: " + tooLarge(s.Untrusted.File)},
	} {
		s.Client.WriteTo(t, s.Client.Cert, s.Client.Key)
		file := map[string]string{"certificate": tc.f.Cert, "key": tc.f.Key, "CA": tc.f.CA}[tc.name]
		testcerts.Write(t, file, bytes.Repeat([]byte("A"), maxFileSize+1))
		if _, err := tlsfiles.New(tlsfiles.Config{Files: tc.f}); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New with a %s of 1 MiB + 1 byte: %v, want %q", tc.name, err, tc.want)
		}
	}

	testcerts.Write(t, s.CA.File, bytes.Repeat([]byte("A"), maxFileSize+1))
	clk.Add(time.Second)
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "with a CA of 1 MiB + 1 byte")
	if err := r.LastError(); err == nil || !strings.Contains(err.Error(), "tlsfiles: still trusting the CA loaded before: reading CA: "+tooLarge(s.CA.File)) {
		t.Errorf("LastError: %v, want the CA refused for its size", err)
	}
	if n := len(log.get()); n != 1 {
		t.Errorf("reported %d errors, want 1", n)
	}
}
