package reliability

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// commitCutProxy is a TCP proxy in front of PostgreSQL that reads the frontend's messages and
// cuts the connection at the COMMIT of some transactions that inserted a job: at every every-th
// such COMMIT it either forwards the COMMIT and then drops the connection before the answer
// (the transaction committed; the client cannot know) or drops the connection without
// forwarding it (the transaction rolls back), in turn.
type commitCutProxy struct {
	ln       net.Listener
	upstream string
	every    int64

	candidates atomic.Int64
	// forwarded counts cuts after the COMMIT reached the server, dropped cuts before.
	forwarded, dropped atomic.Int64
	wg                 sync.WaitGroup
}

// startCommitCutProxy listens on a free loopback port and forwards to upstream (host:port)
// until the test ends.
func startCommitCutProxy(t *testing.T, upstream string, every int64) *commitCutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &commitCutProxy{ln: ln, upstream: upstream, every: every}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

// addr is the proxy's host:port.
func (p *commitCutProxy) addr() string { return p.ln.Addr().String() }

func (p *commitCutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.serve(c) }()
	}
}

// The startup codes of messages that come before the startup message proper.
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
)

var insertJobText = []byte("INSERT INTO sa_job (")

func (p *commitCutProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	var muted atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && !muted.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	defer func() { _ = server.Close(); <-done }()
	// Untyped messages first: SSL or GSS requests (answered by one byte), then the startup.
	for {
		msg, err := readUntyped(client)
		if err != nil {
			return
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if len(msg) >= 8 {
			code := binary.BigEndian.Uint32(msg[4:8])
			if code == sslRequestCode || code == gssEncRequestCode {
				continue
			}
		}
		break
	}
	wroteJob := false
	for {
		typ, msg, err := readTyped(client)
		if err != nil {
			return
		}
		if typ == 'Q' || typ == 'P' {
			text := msg[5:]
			if typ == 'P' {
				// Parse: a statement name, then the query.
				if i := bytes.IndexByte(text, 0); i >= 0 {
					text = text[i+1:]
				}
			}
			if i := bytes.IndexByte(text, 0); i >= 0 {
				text = text[:i]
			}
			if bytes.Contains(text, insertJobText) {
				wroteJob = true
			}
			if isCommit(text) {
				candidate := wroteJob
				wroteJob = false
				if candidate && p.candidates.Add(1)%p.every == 0 {
					muted.Store(true)
					_ = client.Close()
					if (p.forwarded.Load()+p.dropped.Load())%2 == 0 {
						p.forwarded.Add(1)
						_, _ = server.Write(msg)
						// Half-close: the server reads the COMMIT, commits, and only then meets
						// the end of the stream; its answer goes nowhere.
						if tc, ok := server.(*net.TCPConn); ok {
							_ = tc.CloseWrite()
						}
						<-done
					} else {
						p.dropped.Add(1)
					}
					return
				}
			}
			if isRollback(text) {
				wroteJob = false
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

func isCommit(q []byte) bool {
	q = bytes.ToUpper(bytes.TrimRight(bytes.TrimSpace(q), ";"))
	return bytes.Equal(q, []byte("COMMIT")) || bytes.Equal(q, []byte("END"))
}

func isRollback(q []byte) bool {
	q = bytes.ToUpper(bytes.TrimRight(bytes.TrimSpace(q), ";"))
	return bytes.Equal(q, []byte("ROLLBACK")) || bytes.Equal(q, []byte("ABORT"))
}

// readUntyped reads a length-prefixed message without a type byte (a startup message).
func readUntyped(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 4 || n > 1<<20 {
		return nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads one frontend message: its type byte, then the whole message as sent.
func readTyped(r io.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[5:])
	return head[0], msg, err
}
