package hostile

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

const sigTerm = syscall.SIGTERM

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

// tcpState returns the TCP state of c's socket (as in linux/tcp_states.h:
// 1 established, 7 closed, 8 close-wait, ...), read without reading the
// socket's data.
func tcpState(c net.Conn) (int, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var info syscall.TCPInfo
	var serr error
	err = raw.Control(func(fd uintptr) {
		n := uint32(syscall.SizeofTCPInfo)
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&n)), 0)
		if e != 0 {
			serr = e
		}
	})
	if err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return int(info.State), nil
}

// smallReceiveBuffer is a net.Dialer Control that sets a socket's receive
// buffer to n bytes before it connects, turning off the kernel's
// autotuning (which lets a loopback socket buffer up to tcp_rmem's 32 MB
// here, and so hides a peer that never reads).
func smallReceiveBuffer(n int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// tcpEstablished is the state of an open connection.
const tcpEstablished = 1

// serverClosed reports whether the server end of c has been closed: its
// own state (the server's FIN has reached it), or else the state of the
// server's socket in /proc/net/tcp. A client that never reads does not
// see the server's FIN, which waits behind the unread data; the server's
// socket shows the close at once (FIN-WAIT-1, or gone).
func serverClosed(c net.Conn) (bool, error) {
	st, err := tcpState(c)
	if err != nil {
		return false, err
	}
	if st != tcpEstablished {
		return true, nil
	}
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	want := procTCPAddr(remote) + " " + procTCPAddr(local)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[1]+" "+fields[2] != want {
			continue
		}
		st, err := strconv.ParseUint(fields[3], 16, 8)
		if err != nil {
			return false, fmt.Errorf("/proc/net/tcp: state %q: %v", fields[3], err)
		}
		return st != tcpEstablished, nil
	}
	if err := sc.Err(); err != nil {
		return false, err
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
