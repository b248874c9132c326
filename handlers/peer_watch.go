package handlers

import (
	"sync"
	"time"
)

// peerCheckEvery is how often a running request checks that its client is still connected.
// Requests that end sooner never check.
const peerCheckEvery = 250 * time.Millisecond

// watchPeer calls gone once if the client is seen to have closed the connection, checking every
// peerCheckEvery until stop is called.
func (c *guardedConn) watchPeer(gone func()) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(peerCheckEvery, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if peerClosed(c.Conn) {
			gone()
			return
		}
		t.Reset(peerCheckEvery)
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}
