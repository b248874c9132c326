//go:build linux || darwin || freebsd || netbsd || openbsd

package handlers

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed peeks at the socket without consuming anything: an orderly end of stream (or a
// reset) means the client has gone. Bytes waiting (a pipelined request) mean it has not.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || errors.Is(err, syscall.ECONNRESET)
		return true
	})
	return closed
}
