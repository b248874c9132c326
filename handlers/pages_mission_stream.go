package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	s.serveStream(c, scope, &missionStreamer{s: s, v: v, csrf: csrf, scope: scope, last: s.deps.Hub.Cursor(),
		pending: map[uuid.UUID]time.Time{}, marks: map[uuid.UUID]outputMark{}})
	return nil
}

// missionStreamer sends the mission page its drops: a snapshot of the whole field on every
// connect, then the drops that events changed, read back from the database as they are now
// and batched per burst of events.
type missionStreamer struct {
	s     *Server
	v     jobs.Viewer
	csrf  string
	scope feed.Scope
	last  int64
	// pending holds the prompts changed by events not sent yet, with the earliest updated_at
	// among their events (where reading them back starts).
	pending map[uuid.UUID]time.Time
	// marks is what the page has of each job's output, by job id, as the renderings this
	// stream sent left it (pages_mission_output.go).
	marks map[uuid.UUID]outputMark
}

func (m *missionStreamer) open(ctx context.Context, w *bufio.Writer) error {
	field, r, err := m.s.missionField(ctx, m.v, m.csrf)
	if err != nil {
		m.s.log.Warn("mission stream snapshot", "err", err)
		return err
	}
	clear(m.marks)
	m.rendered(r)
	if err := writeMissionEvent(ctx, w, views.MissionSnapshot(field, m.csrf)); err != nil {
		return err
	}
	return m.resync(ctx, w)
}

// resync catches up from the change-feed table: what happened between the subscription and
// the snapshot, or what a lagging subscription dropped.
func (m *missionStreamer) resync(ctx context.Context, w *bufio.Writer) error {
	snapped := false
	for {
		evs, err := m.s.deps.Reads.ReplayEvents(ctx, m.last, m.scope, 500)
		if errors.Is(err, feed.ErrReplayGone) && !snapped {
			snapped = true
			// What happened since is no longer in the feed: send the whole field again.
			m.last = m.s.deps.Hub.Cursor()
			clear(m.pending)
			field, r, err := m.s.missionField(ctx, m.v, m.csrf)
			if err != nil {
				return err
			}
			clear(m.marks)
			m.rendered(r)
			if err := writeMissionEvent(ctx, w, views.MissionSnapshot(field, m.csrf)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			m.s.log.Warn("mission stream replay", "err", err)
			return err
		}
		for _, e := range evs {
			m.add(e)
		}
		if len(evs) < 500 {
			return m.drained(ctx, w)
		}
	}
}

func (m *missionStreamer) event(_ context.Context, _ *bufio.Writer, e feed.Event) error {
	m.add(e)
	return nil
}

func (m *missionStreamer) add(e feed.Event) {
	if e.Seq <= m.last {
		return
	}
	m.last = e.Seq
	var je jobs.JobEvent
	if err := json.Unmarshal(e.Payload, &je); err != nil || je.PromptID == uuid.Nil {
		return
	}
	if t, ok := m.pending[je.PromptID]; !ok || je.UpdatedAt.Before(t) {
		m.pending[je.PromptID] = je.UpdatedAt
	}
}

// drained sends the drops of every prompt the gathered events changed, in one message.
func (m *missionStreamer) drained(ctx context.Context, w *bufio.Writer) error {
	if len(m.pending) == 0 {
		return nil
	}
	ids := make(map[uuid.UUID]bool, len(m.pending))
	var since time.Time
	for id, t := range m.pending {
		ids[id] = true
		if since.IsZero() || t.Before(since) {
			since = t
		}
	}
	clear(m.pending)
	r, err := m.s.missionDropsByID(ctx, m.v, ids, since)
	if err != nil {
		m.s.log.Warn("mission stream drops", "err", err)
		return err
	}
	m.rendered(r)
	if len(r.drops) == 0 {
		return nil
	}
	return writeMissionEvent(ctx, w, views.MissionDrops(r.drops, m.csrf))
}

func (m *missionStreamer) tick(context.Context, *bufio.Writer) error { return nil }
func (m *missionStreamer) tickEvery() time.Duration                  { return 0 }

// writeMissionEvent renders comp as one "drop" event and flushes it.
func writeMissionEvent(ctx context.Context, w *bufio.Writer, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		return err
	}
	if err := writeSSEData(w, missionEventName, buf.Bytes()); err != nil {
		return err
	}
	return w.Flush()
}
