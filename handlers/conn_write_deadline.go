package handlers

import "time"

// writeChunk is the most one write deadline covers: a large answer is written in pieces of
// this size, each with a fresh deadline, so a slow reader that keeps taking data is served
// however long the whole answer takes, and one that stops taking it is cut off.
const writeChunk = 64 << 10

// Write writes p with a deadline on each piece of at most writeChunk bytes: a piece the peer
// does not take within the write timeout fails the write with a timeout, and the transport then
// closes the connection. The deadline is moved before every piece, never set for a whole
// response: fasthttp's own WriteTimeout is one deadline for everything written after the
// handler returns, a whole body or a whole SSE stream, so the server leaves it at 0.
func (c *guardedConn) Write(p []byte) (int, error) {
	d := time.Duration(c.writeTimeout.Load())
	if d <= 0 {
		return c.Conn.Write(p)
	}
	written := 0
	for len(p) > 0 {
		piece := p[:min(len(p), writeChunk)]
		if err := c.Conn.SetWriteDeadline(time.Now().Add(d)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// useStreamWriteTimeout makes d the connection's write deadline while an SSE stream runs on it
// (StreamConfig.WriteTimeout); the returned func puts the connection's own back, for the next
// request the connection may serve.
func (c *guardedConn) useStreamWriteTimeout(d time.Duration) (restore func()) {
	c.writeTimeout.Store(int64(d))
	return func() { c.writeTimeout.Store(int64(c.connTimeout)) }
}
