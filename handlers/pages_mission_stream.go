package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/views"
)

// missionEventName is the SSE event the page's listener swaps (sse-swap="drop").
const missionEventName = "drop"

// missionStream is GET /mission/stream, the page's one SSE stream. Every connection starts
// with a snapshot of the whole field (htmx-ext-sse reconnects without Last-Event-ID, so the
// page is resynchronised on every connect); then each change-feed event of the user's jobs
// sends the changed drops, rendered from the database as they are now, as OOB fragments. It
// reads the change feed like mission/events (hub, replay from the table after a lag) and ends
// on a client disconnect (a failed flush) or server shutdown.
func (s *Server) missionStream(c *fiber.Ctx) error {
	if s.deps.Hub == nil || s.deps.Jobs == nil {
		return fiber.NewError(fiber.StatusServiceUnavailable, "Live updates are not available on this server.")
	}
	v := missionViewer(principalOf(c))
	csrf := csrfOf(c)
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	done := c.Context().Done()
	hub, jobsSvc, log := s.deps.Hub, s.deps.Jobs, s.log
	sub := hub.Subscribe(scope, 512)
	last := hub.Cursor()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		defer func() { sub.Close() }()

		field, err := s.missionField(ctx, v)
		if err != nil {
			log.Warn("mission stream snapshot", "err", err)
			return
		}
		if err := writeMissionEvent(ctx, w, views.MissionSnapshot(field, csrf)); err != nil {
			return
		}

		// pending holds the prompts changed by events not sent yet, with the earliest
		// updated_at among their events (where reading them back starts).
		pending := map[uuid.UUID]time.Time{}
		add := func(e feed.Event) {
			if e.Seq <= last {
				return
			}
			last = e.Seq
			var je jobs.JobEvent
			if err := json.Unmarshal(e.Payload, &je); err != nil || je.PromptID == uuid.Nil {
				return
			}
			if t, ok := pending[je.PromptID]; !ok || je.UpdatedAt.Before(t) {
				pending[je.PromptID] = je.UpdatedAt
			}
		}
		send := func() error {
			if len(pending) == 0 {
				return nil
			}
			ids := make(map[uuid.UUID]bool, len(pending))
			var since time.Time
			for id, t := range pending {
				ids[id] = true
				if since.IsZero() || t.Before(since) {
					since = t
				}
			}
			clear(pending)
			drops, err := s.missionDropsByID(ctx, v, ids, since)
			if err != nil {
				log.Warn("mission stream drops", "err", err)
				return err
			}
			if len(drops) == 0 {
				return nil
			}
			return writeMissionEvent(ctx, w, views.MissionDrops(drops, csrf))
		}
		// replay catches up from the change-feed table: what happened between the snapshot's
		// subscription and now, or what a lagging subscription dropped.
		replay := func() error {
			for {
				evs, err := jobsSvc.ReplayEvents(ctx, last, scope, 500)
				if err != nil {
					log.Warn("mission stream replay", "err", err)
					return err
				}
				for _, e := range evs {
					add(e)
				}
				if len(evs) < 500 {
					return send()
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
				if _, err := w.WriteString(": ping\n\n"); err != nil {
					return
				}
				if err := w.Flush(); err != nil {
					return
				}
			case e, ok := <-sub.C:
				if !ok {
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
				add(e)
				// Batch what is already queued into one message.
				if len(sub.C) == 0 {
					if err := send(); err != nil {
						return
					}
				}
			}
		}
	})
	return nil
}

// writeMissionEvent renders comp as one "drop" event, one data line per line of HTML, and
// flushes it.
func writeMissionEvent(ctx context.Context, w *bufio.Writer, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		return err
	}
	html := strings.ReplaceAll(strings.ReplaceAll(buf.String(), "\r\n", "\n"), "\r", "\n")
	if _, err := w.WriteString("event: " + missionEventName + "\n"); err != nil {
		return err
	}
	for _, line := range strings.Split(html, "\n") {
		if _, err := w.WriteString("data: " + line + "\n"); err != nil {
			return err
		}
	}
	if _, err := w.WriteString("\n"); err != nil {
		return err
	}
	return w.Flush()
}
