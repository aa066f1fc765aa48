//go:build !linux

package hostile

import (
	"errors"
	"net"
	"os"
	"syscall"
)

var errLinuxOnly = errors.New("hostile: attacks run on Linux only")

func setNofile(uint64) error                                             { return errLinuxOnly }
func maxRSS(*os.ProcessState) int64                                      { return 0 }
func execve(string, []string) error                                      { return errLinuxOnly }
func serverClosed(net.Conn) (bool, error)                                { return false, errLinuxOnly }
func smallReceiveBuffer(int) func(string, string, syscall.RawConn) error { return nil }
