package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sseEvent is one job.state_changed event as the client received it.
type sseEvent struct {
	ID    int64
	JobID string
	State string
	// Conn numbers the connection that delivered it (1 for the first).
	Conn int
}

// sseClient reads GET /sa-core/v1/mission/events like a browser's EventSource: on any end of
// the stream it reconnects after a short pause with Last-Event-ID set to the last id it saw.
type sseClient struct {
	base, token string
	hc          *http.Client

	mu        sync.Mutex
	events    []sseEvent
	lastID    int64
	conns     int
	failures  []string
	cancelCur context.CancelFunc
	connected chan struct{}
	once      sync.Once
}

// newSSEClient returns a client; run starts it.
func newSSEClient(base, token string) *sseClient {
	return &sseClient{base: base, token: token, connected: make(chan struct{}),
		hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

// run reads and reconnects until ctx ends.
func (c *sseClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.stream(ctx); err != nil && ctx.Err() == nil {
			c.mu.Lock()
			if len(c.failures) < 1000 {
				c.failures = append(c.failures, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// drop ends the current connection, as a network failure would; run reconnects.
func (c *sseClient) drop() {
	c.mu.Lock()
	cancel := c.cancelCur
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// stream makes one connection and reads it until it ends.
func (c *sseClient) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	c.cancelCur = cancel
	last := c.lastID
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.base+"/sa-core/v1/mission/events", nil)
	if err != nil {
		return fmt.Errorf("build events request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("connect to events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return fmt.Errorf("events answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c.mu.Lock()
	c.conns++
	conn := c.conns
	c.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var id int64
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" && name == "job.state_changed" {
				var p struct {
					JobID string `json:"job_id"`
					State string `json:"state"`
				}
				if err := json.Unmarshal([]byte(data), &p); err != nil {
					return fmt.Errorf("event %d has bad data %q: %w", id, data, err)
				}
				c.mu.Lock()
				c.events = append(c.events, sseEvent{ID: id, JobID: p.JobID, State: p.State, Conn: conn})
				c.lastID = max(c.lastID, id)
				c.mu.Unlock()
			}
			id, name, data = 0, "", ""
		case strings.HasPrefix(line, ":"):
			if strings.TrimSpace(line[1:]) == "connected" {
				c.once.Do(func() { close(c.connected) })
			}
		case strings.HasPrefix(line, "id:"):
			n, err := strconv.ParseInt(strings.TrimSpace(line[3:]), 10, 64)
			if err != nil {
				return fmt.Errorf("bad event id line %q", line)
			}
			id = n
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data = strings.TrimSpace(line[5:])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	return fmt.Errorf("events stream ended")
}

// snapshot returns what the client received so far.
func (c *sseClient) snapshot() (events []sseEvent, last int64, conns int, failures []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sseEvent(nil), c.events...), c.lastID, c.conns, append([]string(nil), c.failures...)
}
