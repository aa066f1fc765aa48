package childproc

import "syscall"

// procAttr makes the kernel kill a child if the parent dies without
// closing its stdin first, even while the child is stopped. (Linux sends
// the signal when the thread that started the child exits; Go's runtime
// keeps its threads, so in practice that is when the process does.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
