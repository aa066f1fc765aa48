package childproc

import "syscall"

// procAttr has the kernel kill the child when the thread that started it
// exits; Go keeps its threads, so in practice when the process does.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
