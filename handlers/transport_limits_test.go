package handlers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"asterion/jobs/jobstest"
)

// slowPost writes head, then up to total bytes of body in 8 KiB pieces, looking for an answer
// after each piece, and stops at the first answer (or write error). It returns the answer and
// how many body bytes the client had managed to send when it came.
func slowPost(t *testing.T, base, head string, total int, chunked bool) (*http.Response, []byte, int) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	piece := bytes.Repeat([]byte("a"), 8<<10)
	sent := 0
	for sent < total {
		out := piece
		if chunked {
			out = append([]byte(fmt.Sprintf("%x\r\n", len(piece))), append(piece, "\r\n"...)...)
		}
		if _, err := conn.Write(out); err != nil {
			break // the server stopped reading and closed: its answer is waiting
		}
		sent += len(piece)
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := br.Peek(1); err == nil {
			break
		} else if !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer after %d body bytes: %v", sent, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, sent
}

// TestLargeBodyRefusedBeforeRead: a 5 MiB body, announced by Content-Length or sent chunked, is
// answered 413 (a problem document for the API, an error page with the browser headers for a
// page) while the client has sent at most about 300 KiB of it, before any authentication.
func TestLargeBodyRefusedBeforeRead(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	base := serveHTTP(t, e)
	const total, most = 5 << 20, 300 << 10
	host := strings.TrimPrefix(base, "http://")
	for _, tc := range []struct {
		name, path, ctype string
		chunked           bool
	}{
		{"API, Content-Length", "/sa-core/v1/prompt", "application/json", false},
		{"API, chunked", "/sa-core/v1/prompt", "application/json", true},
		{"page form, Content-Length", "/mission/prompts", "application/x-www-form-urlencoded", false},
	} {
		head := "POST " + tc.path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: " + tc.ctype + "\r\n"
		if tc.chunked {
			head += "Transfer-Encoding: chunked\r\n\r\n"
		} else {
			head += fmt.Sprintf("Content-Length: %d\r\n\r\n", total)
		}
		resp, body, sent := slowPost(t, base, head, total, tc.chunked)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s, want 413", tc.name, resp.StatusCode, body)
			continue
		}
		if sent > most {
			t.Errorf("%s: the client had sent %d bytes before the 413, want at most %d", tc.name, sent, most)
		}
		if strings.HasPrefix(tc.path, "/sa-core/") {
			wantProblem(t, resp, string(body), http.StatusRequestEntityTooLarge)
		} else {
			wantHTML(t, resp, string(body), http.StatusRequestEntityTooLarge)
			checkBrowserHeaders(t, tc.name, resp.Header)
		}
		t.Logf("%s: 413 after %d body bytes", tc.name, sent)
	}
}

// TestConnectionsPerAddressCapped: with a cap of 3, three open connections from one address are
// served, the fourth is answered 429 and closed before any request, and once one of the three
// closes a new connection is served again.
func TestConnectionsPerAddressCapped(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{Limits: Limits{MaxConnsPerIP: 3}})
	base := serveHTTP(t, e)
	addr := strings.TrimPrefix(base, "http://")
	healthz := "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	get := func(c net.Conn) (*http.Response, error) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, healthz); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	var open []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp, err := get(c); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %v %v", i+1, resp, err)
		}
		open = append(open, c)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	c.Close()
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth connection: %v %v, want 429 before any request", resp, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("429 Content-Type %q", ct)
	}
	// The first three are still served.
	if resp, err := get(open[1]); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("an open connection after the refusal: %v %v", resp, err)
	}
	open[0].Close()
	jobstest.WaitFor(t, 20*time.Second, "a connection served after one of three closed", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := get(c)
		c.Close()
		return err == nil && resp.StatusCode == http.StatusOK
	})
}
