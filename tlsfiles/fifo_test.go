//go:build linux || darwin || freebsd || netbsd || openbsd

package tlsfiles_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/namedpipe"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/testkit/testcerts"
	"github.com/sluice-rpc/sluice/tlsfiles"
)

// A named pipe in place of a certificate, key or CA is an error naming
// it, returned at once: the pipe is neither waited on when opened nor
// read. Put in place of a certificate a running server presents, it
// holds up no handshake: they go on with the certificate loaded before,
// and LastError and Reload say why.
func TestNamedPipe(t *testing.T) {
	s := testcerts.New(t)
	fifo := filepath.Join(t.TempDir(), "fifo.pem")
	namedpipe.Make(t, fifo)
	notRegular := func(file string) string { return fmt.Sprintf("%q is not a regular file", file) }
	for _, tc := range []struct {
		name string
		f    tlsfiles.Files
		want string
	}{
		{"certificate", tlsfiles.Files{Cert: fifo, Key: s.Server.Key}, "tlsfiles: reading certificate: " + notRegular(fifo)},
		{"key", tlsfiles.Files{Cert: s.Server.Cert, Key: fifo}, "tlsfiles: reading key: " + notRegular(fifo)},
		{"CA", tlsfiles.Files{CA: fifo}, "tlsfiles: reading CA: " + notRegular(fifo)},
	} {
		err := within(t, "New with a named pipe as the "+tc.name, func() error {
			_, err := tlsfiles.New(tlsfiles.Config{Files: tc.f})
			return err
		})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New with a named pipe as the %s: %v, want %q", tc.name, err, tc.want)
		}
	}

	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var log errorLog
	r := newReloader(t, tlsfiles.Config{Files: tlsfiles.Files{Cert: s.Server.Cert, Key: s.Server.Key, CA: s.CA.File}, Clock: clk, Logger: log.logger()})
	srv := serve(t, serverConfig(t, r))
	client := mustClientConfig(t, tlsfiles.Files{Cert: s.Client.Cert, Key: s.Client.Key, CA: s.CA.File})
	namedpipe.Make(t, s.Server.Cert)
	clk.Add(time.Second)
	presented(t, mustDial(t, srv.addr, client), s.Server.Leaf, "with a named pipe in place of the certificate")
	want := "tlsfiles: still presenting the certificate loaded before: reading certificate: " + notRegular(s.Server.Cert)
	if err := within(t, "LastError", r.LastError); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("LastError: %v, want %q", err, want)
	}
	if err := within(t, "Reload", r.Reload); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Reload: %v, want %q", err, want)
	}
	if errs := log.get(); len(errs) != 2 {
		t.Errorf("reported %v, want the handshake's look and Reload's", errs)
	}
}
