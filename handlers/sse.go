package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/readmodel"
)

// SSEHeartbeat is how often a comment line keeps an idle stream open (at most 15 s apart).
const SSEHeartbeat = 15 * time.Second

// writeSSEData writes one event named name whose data is data. An SSE parser ends a line at
// CRLF, LF or a lone CR, so each line of data, ended by any of them, goes out as its own data
// line: no byte of data can end a line early and start a field (an id, an event name) of its
// own. The client joins the data lines with LF.
func writeSSEData(w *bufio.Writer, name string, data []byte) error {
	if strings.ContainsAny(name, "\r\n") {
		return fmt.Errorf("SSE event name %q holds a line break", name)
	}
	w.WriteString("event: ")
	w.WriteString(name)
	w.WriteByte('\n')
	for {
		i := bytes.IndexAny(data, "\r\n")
		w.WriteString("data: ")
		if i < 0 {
			w.Write(data)
			w.WriteByte('\n')
			break
		}
		w.Write(data[:i])
		w.WriteByte('\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	_, err := w.WriteString("\n")
	return err
}

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

// missionEvents is GET /sa-core/v1/mission/events: the caller's job state changes as SSE, with
// Last-Event-ID replay from the change-feed table and a heartbeat comment every 15 s.
func (s *Server) missionEvents(c *fiber.Ctx) error {
	scope := viewerOf(principalOf(c)).Scope()
	scope.Topics = []string{feed.TopicJob}
	last := parseLastEventID(c.Get("Last-Event-ID"))
	if last == 0 {
		last = parseLastEventID(c.Query("last_event_id"))
	}
	if last == 0 {
		last = s.deps.Hub.Cursor()
	}
	s.serveStream(c, scope, &apiStreamer{replayer: s.deps.Reads, scope: scope, last: last, log: s.log, frames: s.outputFrames,
		snap: s.apiSnapshot(viewerOf(principalOf(c))), cursor: s.deps.Hub.Cursor})
	return nil
}

// apiSnapshotJobs is how many of the newest jobs an API stream's snapshot sends.
const apiSnapshotJobs = 200

// apiSnapshot returns the snapshot a stream of v sends when its Last-Event-ID is older than the
// retained feed: the current state of v's newest jobs as job.state_changed events without ids,
// oldest first, after a comment that says why.
func (s *Server) apiSnapshot(v jobs.Viewer) func(ctx context.Context, w *bufio.Writer) error {
	return func(ctx context.Context, w *bufio.Writer) error {
		list, _, err := s.deps.Reads.ListJobs(ctx, v, readmodel.JobFilter{Limit: apiSnapshotJobs})
		if err != nil {
			return fmt.Errorf("stream snapshot: %w", err)
		}
		if _, err := w.WriteString(": snapshot: the events after Last-Event-ID are no longer retained\n\n"); err != nil {
			return err
		}
		for i := len(list) - 1; i >= 0; i-- {
			j := list[i]
			b, err := json.Marshal(jobs.JobEvent{PromptID: j.PromptID, JobID: j.ID, State: j.State, Attempt: j.Attempt,
				ErrorKind: j.ErrorKind, ResponseID: j.ResponseID, UpdatedAt: j.UpdatedAt, OperationID: j.OperationID,
				Priority: j.Priority})
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "event: job.state_changed\ndata: %s\n\n", b); err != nil {
				return err
			}
		}
		return nil
	}
}

// eventReplayer reads numbered change-feed events back from the table.
type eventReplayer interface {
	ReplayEvents(ctx context.Context, after int64, scope feed.Scope, limit int) ([]feed.Event, error)
}

// apiStreamer is the API's job.state_changed stream: every event once, in sequence order, with
// what the client missed replayed from the table on connect and after a lag.
type apiStreamer struct {
	replayer eventReplayer
	scope    feed.Scope
	last     int64
	log      *slog.Logger
	// snap writes a fresh snapshot, for a last event older than the retained feed.
	snap func(ctx context.Context, w *bufio.Writer) error
	// cursor is the feed's high mark as this process knows it (the hub's).
	cursor func() int64
	// frames encodes each chunk of live output once for all streams.
	frames *outputFrames
}

func (a *apiStreamer) open(ctx context.Context, w *bufio.Writer) error {
	if _, err := w.WriteString(": connected\n\n"); err != nil {
		return err
	}
	return a.resync(ctx, w)
}

// resync replays what came after the last event sent; live events at or below it are skipped.
// When the feed no longer holds what came after it, a snapshot replaces the replay, and the
// stream goes on from the high mark read before it (sending its id, so that a reconnect asks
// for what followed the snapshot).
func (a *apiStreamer) resync(ctx context.Context, w *bufio.Writer) error {
	snapped := false
	for {
		evs, err := a.replayer.ReplayEvents(ctx, a.last, a.scope, 500)
		if errors.Is(err, feed.ErrReplayGone) && a.snap != nil && a.cursor != nil && !snapped {
			snapped = true
			mark := a.cursor()
			if err := a.snap(ctx, w); err != nil {
				return err
			}
			a.last = mark
			if _, err := fmt.Fprintf(w, "id: %d\n\n", mark); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			a.log.Warn("replay events", "err", err)
			return err
		}
		for _, e := range evs {
			if err := a.event(ctx, w, e); err != nil {
				return err
			}
		}
		if len(evs) < 500 {
			return nil
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// event writes a job.state_changed event unless it was already sent.
func (a *apiStreamer) event(_ context.Context, w *bufio.Writer, e feed.Event) error {
	if e.Seq <= a.last {
		return nil
	}
	a.last = e.Seq
	// The feed hands out payloads compacted to one line, as an SSE data line needs.
	_, err := fmt.Fprintf(w, "id: %d\nevent: job.state_changed\ndata: %s\n\n", e.Seq, e.Payload)
	return err
}

func (a *apiStreamer) drained(context.Context, *bufio.Writer) error { return nil }
func (a *apiStreamer) tick(context.Context, *bufio.Writer) error    { return nil }
func (a *apiStreamer) tickEvery() time.Duration                     { return 0 }
