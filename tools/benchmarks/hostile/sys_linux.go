package hostile

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// setNofile sets this process's descriptor limit (soft and hard) to n. It
// cannot raise the hard limit without privilege; it says so.
func setNofile(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Max < n {
		return fmt.Errorf("the descriptor limit's hard maximum is %d, below the %d wanted, and cannot be raised here", lim.Max, n)
	}
	lim.Cur, lim.Max = n, n
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// maxRSS is an exited process's peak resident memory in bytes (its
// rusage's ru_maxrss, in KiB on Linux), 0 if unknown.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}

// execve replaces this process with path, run with args.
func execve(path string, args []string) error {
	return syscall.Exec(path, args, os.Environ())
}

// smallReceiveBuffer is a net.Dialer Control that sets a socket's receive
// buffer to n bytes before it connects, turning off the kernel's
// autotuning (which lets a loopback socket buffer up to tcp_rmem's 32 MB
// here, and so hides a peer that never reads).
func smallReceiveBuffer(n int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}); err != nil {
			return err
		}
		return serr
	}
}

// tcpEstablished is the state of an open connection in /proc/net/tcp.
const tcpEstablished = 1

// serverClosed reports whether the server end of c, on this host, has been
// closed: its socket in /proc/net/tcp is no longer established, or gone.
// A client that never reads does not see the server's FIN, which waits
// behind the unread data; the server's socket shows the close at once.
func serverClosed(c net.Conn) (bool, error) {
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	want := procTCPAddr(remote) + " " + procTCPAddr(local)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[1]+" "+f[2] == want {
			st, err := strconv.ParseUint(f[3], 16, 8)
			return st != tcpEstablished, err
		}
	}
	return true, nil // the server's socket is gone
}

// procTCPAddr formats an IPv4 address as /proc/net/tcp does: the address
// in the host's byte order (little-endian here), the port big-endian.
func procTCPAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}
