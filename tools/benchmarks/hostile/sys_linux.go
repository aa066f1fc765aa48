package hostile

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// setNofile sets this process's descriptor limit (soft and hard) to n.
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

// maxRSS is an exited process's peak resident memory in bytes, 0 if unknown.
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
// buffer to n bytes, turning off the kernel's autotuning (which hides a
// peer that never reads).
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

const tcpEstablished = 1 // a connection's state in /proc/net/tcp

// serverClosed reports whether the server end of c, on this host, is no
// longer established in /proc/net/tcp: a client that never reads does not
// see the server's FIN, which waits behind the unread data.
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

// procTCPAddr formats an IPv4 address as /proc/net/tcp does (little-endian).
func procTCPAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}
