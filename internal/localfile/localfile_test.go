//go:build linux || darwin || freebsd || netbsd || openbsd

package localfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/namedpipe"
)

// within runs f on its own goroutine and fails t if it has not returned
// within a second: every case here must return at once, not block.
func within(t *testing.T, what string, f func() ([]byte, error)) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		d, err := f()
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Read blocked", what)
		return nil, nil
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("0123456789a"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	namedpipe.Make(t, fifo)
	for _, tc := range []struct {
		file    string
		want    string // the data, or the start of the error
		wantErr error
	}{
		{ok, "0123456789", nil},
		{link, "0123456789", nil},
		{big, `"` + big + `" is larger than 10 bytes (10 bytes), the most a test file may hold here`, ErrTooLarge},
		{fifo, `"` + fifo + `" is not a regular file (its mode is`, ErrNotRegular},
		{dir, `"` + dir + `" is not a regular file`, ErrNotRegular},
		{"/dev/zero", `"/dev/zero" is not a regular file`, ErrNotRegular},
		{filepath.Join(dir, "missing"), "open " + filepath.Join(dir, "missing"), fs.ErrNotExist},
	} {
		data, err := within(t, tc.file, func() ([]byte, error) { return Read(tc.file, 10, "a test file") })
		switch {
		case tc.wantErr == nil && (err != nil || string(data) != tc.want):
			t.Errorf("Read(%s) = %q, %v; want %q", tc.file, data, err, tc.want)
		case tc.wantErr != nil && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, tc.wantErr)):
			t.Errorf("Read(%s) = %q, %v; want an error starting %q, wrapping %v", tc.file, data, err, tc.want, tc.wantErr)
		}
	}
}

// A file whose size says 0 but that holds more (as under /proc) is read
// only up to the limit.
func TestReadBoundsWhatTheSizeHides(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc here")
	}
	_, err := Read("/proc/self/maps", 16, "a test file")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read(/proc/self/maps, 16) = %v, want ErrTooLarge", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 4 << 20: "4 MiB", 64 << 10: "64 KiB", 1000: "1000 bytes", 1<<20 + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
