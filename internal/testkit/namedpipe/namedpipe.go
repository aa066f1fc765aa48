//go:build linux || darwin || freebsd || netbsd || openbsd

// Package namedpipe makes named pipes for the tests that check a file is read
// as untrusted: a reader that opens a pipe blocks until a writer comes.
package namedpipe

import (
	"os"
	"syscall"
	"testing"
)

// Make makes a named pipe at file, removing what is there, and skips the
// test where the file system has none. It returns release, which opens
// the pipe for writing and closes it at once, so that a reader blocked on
// opening it goes on (it reads nothing); release also runs when the test
// ends, for a reader that blocked because the test failed. Calling it
// without a reader does nothing.
func Make(t testing.TB, file string) (release func()) {
	t.Helper()
	if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	release = func() {
		if w, err := os.OpenFile(file, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	}
	t.Cleanup(release)
	return release
}
