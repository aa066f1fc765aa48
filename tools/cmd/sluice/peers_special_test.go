//go:build linux || darwin || freebsd || netbsd || openbsd

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-rpc/sluice/discovery/file"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// A -P file that is not a regular file, or is larger than
// file.MaxFileSize, is an error naming the flag and the file, returned
// at once: a named pipe is not waited on, a device not read.
func TestPeerListReadsOnlyBoundedRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	t.Cleanup(func() { // release a reader that blocked, if the test failed
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
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
			p := peerFlags{list: tc.list, etcd: &etcdFlags{}}
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
