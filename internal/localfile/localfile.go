// Package localfile reads the local files a program is told to read (a
// certificate, a Thrift IDL, a list of peers) as untrusted input: a file
// is read only if it is a regular file, and at most up to a size limit,
// so that a named pipe, a device or a huge file in its place is an error
// naming it, returned at once, not a read that blocks or takes the
// machine's memory.
//
// It is the one guarded read of Sluice's packages (tlsfiles,
// discovery/file, the sluice command's -t and -P), and imports the
// standard library only.
package localfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by Read's error for a file that is not a
// regular file (a named pipe, a device, a directory, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by Read's error for a file larger than its
// limit.
var ErrTooLarge = errors.New("file too large")

// Read reads file, a regular file (a symbolic link to one will do) of at
// most limit bytes; what names what the file should be ("a PEM file", "a
// Thrift IDL file"), for the error. It never blocks on what is not a
// regular file: the file is opened without blocking (a named pipe with
// no writer would block the open) and refused unless regular, and at most
// limit+1 bytes are read, whatever its size says (a file under /proc
// says 0, and one may grow while read). Its errors name the file, and
// wrap ErrNotRegular or ErrTooLarge when the file is not what it should
// be; a file that cannot be opened or read returns the *fs.PathError.
func Read(file string, limit int64, what string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is %w (its mode is %v): name %s", file, ErrNotRegular, fi.Mode(), what)
	}
	if fi.Size() > limit {
		return nil, tooLarge(file, limit, what)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err // a *os.PathError, naming the file
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(file, limit, what) // it grew since the Stat
	}
	return data, nil
}

// tooLarge is Read's error for file over limit.
func tooLarge(file string, limit int64, what string) error {
	return &sizeError{file: file, limit: limit, what: what}
}

type sizeError struct {
	file  string
	limit int64
	what  string
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%q is larger than %d bytes (%s), the most %s may hold here", e.file, e.limit, Size(e.limit), e.what)
}

func (e *sizeError) Unwrap() error { return ErrTooLarge }

// Size returns n bytes as a person reads them: "1 MiB", "64 KiB", or
// "1000 bytes" when n is not a whole number of KiB.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
