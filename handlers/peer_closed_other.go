//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package handlers

import "net"

// peerClosed cannot peek at a socket on this platform: a gone client is noticed at the request
// deadline.
func peerClosed(net.Conn) bool { return false }
