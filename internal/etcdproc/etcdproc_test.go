package etcdproc

import (
	"os"
	"path/filepath"
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

// fakeEtcd writes a script that stands in for etcd: each run appends a
// line to its log, and the runs print, in turn, the lines of outputs and
// exit (the last repeated).
func fakeEtcd(t *testing.T, outputs ...string) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "etcd"), filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho \"$*\" >> '" + log + "'\nn=$(wc -l < '" + log + "')\ncase $n in\n"
	for i, o := range outputs {
		pat := "*"
		if i < len(outputs)-1 {
			pat = string(rune('1' + i))
		}
		script += pat + ") echo '" + o + "' ;;\n"
	}
	script += "esac\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

// runs returns the command lines of the runs fakeEtcd logged.
func runs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// listens returns the client and peer URLs of an etcd command line.
func listens(t *testing.T, line string) [2]string {
	t.Helper()
	var out [2]string
	args := strings.Fields(line)
	for i, a := range args[:len(args)-1] {
		switch a {
		case "--listen-client-urls":
			out[0] = args[i+1]
		case "--listen-peer-urls":
			out[1] = args[i+1]
		}
	}
	if out[0] == "" || out[1] == "" {
		t.Fatalf("no listen URLs in %q", line)
	}
	return out
}

// A member whose port was taken between FreeURLs and its bind is started
// again on other ports; any other failure is returned at once.
func TestStartOnFreePortsRetriesATakenPort(t *testing.T) {
	bin, log := fakeEtcd(t, "listen tcp 127.0.0.1:1: bind: address already in use", "some other failure")
	_, _, err := StartOnFreePorts(Member{Bin: bin, Name: "x", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "some other failure") {
		t.Fatalf("StartOnFreePorts = %v, want the second run's failure", err)
	}
	r := runs(t, log)
	if len(r) != 2 {
		t.Fatalf("%d runs, want 2: one on taken ports, one on others that failed otherwise", len(r))
	}
	first, second := listens(t, r[0]), listens(t, r[1])
	if first[0] == second[0] || first[1] == second[1] {
		t.Fatalf("the second run listens on %v, the taken one on %v: want other ports", second, first)
	}
}

// Ports that keep being taken are tried portAttempts times, not forever.
func TestStartOnFreePortsGivesUp(t *testing.T) {
	bin, log := fakeEtcd(t, "listen tcp 127.0.0.1:1: bind: address already in use")
	_, _, err := StartOnFreePorts(Member{Bin: bin, Name: "x", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("StartOnFreePorts = %v, want the taken port's error", err)
	}
	if n := len(runs(t, log)); n != portAttempts {
		t.Fatalf("%d runs, want %d", n, portAttempts)
	}
}
