package etcdproc

import (
	"strings"
	"testing"
)

// A binary that exits at once is an error saying so, with its output, not
// a wait for a health check that never answers.
func TestStartReportsAnEarlyExit(t *testing.T) {
	client, err := FreeURL()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := FreeURL()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(Member{Bin: "/bin/sh", Name: "x", Dir: t.TempDir(), Client: client, Peer: peer})
	if err == nil || !strings.Contains(err.Error(), "/bin/sh exited") {
		t.Fatalf("Start(/bin/sh) = %v, want an error saying it exited", err)
	}
}

func TestStartNamesAMissingBinary(t *testing.T) {
	_, err := Start(Member{Bin: "/nonexistent/etcd", Name: "x", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "start /nonexistent/etcd") {
		t.Fatalf("Start = %v, want an error naming the binary", err)
	}
}
