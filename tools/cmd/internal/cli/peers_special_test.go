//go:build linux || darwin || freebsd || netbsd || openbsd

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/namedpipe"

	"github.com/sluice-rpc/sluice/discovery/file"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// A -P file that is not a regular file, or is larger than
// file.MaxFileSize, is an error naming the flag and the file, returned
// at once: a named pipe is not waited on, a device not read.
func TestPeerListReadsOnlyBoundedRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	namedpipe.Make(t, fifo)
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("127.0.0.1:4040\n"+strings.Repeat("#\n", file.MaxFileSize/2)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ list, want string }{
		{fifo, fmt.Sprintf("--peer-list: %q is not a regular file", fifo)},
		{"file:/dev/zero", `--peer-list: "/dev/zero" is not a regular file`},
		{big, fmt.Sprintf("--peer-list: %q is larger than 4194304 bytes (4 MiB), the most a file of peers may hold here", big)},
	} {
		done := make(chan error, 1)
		go func() {
			p := peerFlags{list: tc.list, etcd: &EtcdFlags{}}
			src, err := p.source()
			if err == nil {
				src.close()
			}
			done <- err
		}()
		if err := testwait.Recv(t, done, "-P "+tc.list); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("-P %s: %v, want %q", tc.list, err, tc.want)
		}
	}
}

// The other files the command reads (--service-config, the etcd flags'
// PEM files) are read the same way: a named pipe or a device in their
// place is an error naming the flag, returned at once.
func TestFlagFilesAreReadAsUntrusted(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	namedpipe.Make(t, fifo)
	notRegular := func(f string) string { return fmt.Sprintf("%q is not a regular file", f) }
	for _, tc := range []struct {
		name string
		read func() error
		want string
	}{
		{"--service-config", func() error {
			_, err := (&policyFlags{config: fifo, retryBackoff: 10 * time.Millisecond}).serviceConfig("kv", "get")
			return err
		}, "--service-config " + fifo + ": " + notRegular(fifo)},
		{"--etcd-cacert", func() error { _, err := (&EtcdFlags{cacert: fifo}).TLSConfig(); return err }, "--etcd-cacert: " + notRegular(fifo)},
		{"--etcd-cert", func() error { _, err := (&EtcdFlags{cert: fifo, key: fifo}).TLSConfig(); return err }, "--etcd-cert: " + notRegular(fifo)},
		{"--etcd-key", func() error {
			cert := filepath.Join(t.TempDir(), "cert.pem")
			if err := os.WriteFile(cert, []byte("x"), 0o600); err != nil {
				return err
			}
			_, err := (&EtcdFlags{cert: cert, key: fifo}).TLSConfig()
			return err
		}, "--etcd-key: " + notRegular(fifo)},
	} {
		done := make(chan error, 1)
		go func() { done <- tc.read() }()
		if err := testwait.Recv(t, done, tc.name+" naming a named pipe"); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
