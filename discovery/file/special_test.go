//go:build linux || darwin || freebsd || netbsd || openbsd

package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/namedpipe"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery/file"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// A file of peers that is not a regular file, or is larger than
// MaxFileSize, is a failure naming it, reported at once: the resolver
// neither waits on a named pipe nor reads a device or a huge file whole.
func TestResolverReadsOnlyBoundedRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	release := namedpipe.Make(t, fifo) // lets a reader blocked on the pipe go
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("127.0.0.1:4040\n"+strings.Repeat("#\n", file.MaxFileSize/2)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"fifo", fifo, fmt.Sprintf("file: %q is not a regular file", fifo)},
		{"device", zero, fmt.Sprintf("file: %q is not a regular file", zero)},
		{"big", big, fmt.Sprintf("file: %q is larger than 4194304 bytes (4 MiB), the most a file of peers may hold here", big)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := file.New(file.Config{Path: tc.path, Clock: clock.NewFake(time.Unix(1000, 0))})
			if err != nil {
				t.Fatal(err)
			}
			u := newUpdates()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.Resolve(ctx, u) }()
			defer func() { cancel(); release(); <-done }()
			if err := testwait.Recv(t, u.errs, "the failure of "+tc.name); !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
}
