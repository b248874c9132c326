package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs/feed"
)

// SSEHeartbeat is how often a comment line keeps an idle stream open (CONTRACT.md: ≤ 15 s).
const SSEHeartbeat = 15 * time.Second

// parseLastEventID reads a Last-Event-ID: a non-negative decimal integer, else none (0).
func parseLastEventID(s string) int64 {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 19 {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// eventSink writes one SSE stream; it is used inside the body stream writer, after the
// handler returned, so it holds no *fiber.Ctx.
type eventSink struct {
	w    *bufio.Writer
	last int64
}

func (s *eventSink) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.w.Flush()
}

// job writes a job.state_changed event unless it was already sent.
func (s *eventSink) job(e feed.Event) error {
	if e.Seq <= s.last {
		return nil
	}
	s.last = e.Seq
	data := compactJSON(e.Payload)
	if _, err := fmt.Fprintf(s.w, "id: %d\nevent: job.state_changed\ndata: %s\n\n", e.Seq, data); err != nil {
		return err
	}
	return nil
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "{}"
	}
	return b.String()
}

// missionEvents is GET /sa-core/v1/mission/events: the caller's job state changes as SSE, with
// Last-Event-ID replay from the change-feed table and a heartbeat comment every 15 s.
func (s *Server) missionEvents(c *fiber.Ctx) error {
	scope := viewerOf(principalOf(c)).Scope()
	scope.Topics = []string{feed.TopicJob}
	last := parseLastEventID(c.Get("Last-Event-ID"))
	if last == 0 {
		last = parseLastEventID(c.Query("last_event_id"))
	}
	s.streamEvents(c, scope, last, nil)
	return nil
}

// streamEvents runs an SSE stream of scope starting after seq last (or from now when 0). start,
// when set, writes a snapshot before live events (pages send theirs on every connect). It reads
// everything it needs from c before the stream starts, and ends on client disconnect (a failed
// flush) or server shutdown.
func (s *Server) streamEvents(c *fiber.Ctx, scope feed.Scope, last int64, start func(ctx context.Context, w *bufio.Writer) error) {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	done := c.Context().Done()
	hub, jobsSvc, log := s.deps.Hub, s.deps.Jobs, s.log
	sub := hub.Subscribe(scope, 512)
	if last == 0 {
		last = hub.Cursor()
	}
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		defer func() { sub.Close() }()
		sink := &eventSink{w: w, last: last}
		if start != nil {
			if err := start(ctx, w); err != nil {
				return
			}
		}
		if err := sink.comment("connected"); err != nil {
			return
		}
		// Replay what the client missed; live events at or below what was replayed are skipped.
		replay := func() error {
			for {
				evs, err := jobsSvc.ReplayEvents(ctx, sink.last, scope, 500)
				if err != nil {
					log.Warn("replay events", "err", err)
					return err
				}
				for _, e := range evs {
					if err := sink.job(e); err != nil {
						return err
					}
				}
				if err := w.Flush(); err != nil {
					return err
				}
				if len(evs) < 500 {
					return nil
				}
			}
		}
		if err := replay(); err != nil {
			return
		}
		tick := time.NewTicker(SSEHeartbeat)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := sink.comment("ping"); err != nil {
					return
				}
			case e, ok := <-sub.C:
				if !ok {
					// Fell behind (or the hub stopped): catch up from the table, then listen again.
					select {
					case <-done:
						return
					default:
					}
					sub = hub.Subscribe(scope, 512)
					if err := replay(); err != nil {
						return
					}
					continue
				}
				if err := sink.job(e); err != nil {
					return
				}
				if len(sub.C) == 0 {
					if err := w.Flush(); err != nil {
						return
					}
				}
			}
		}
	})
}
