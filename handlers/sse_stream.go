package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/db"
	"asterion/jobs/feed"
	"asterion/jobs/output"
)

// streamBuffer is how many events a stream's subscription holds while its writer is busy. A
// channel's buffer is allocated whole when it is made, so this is most of a stream's memory; a
// stream that falls further behind is dropped by the hub and resyncs from the table.
const streamBuffer = 128

// outputBuffer is how many chunks of live output a stream holds while its writer is busy.
const outputBuffer = 256

// streamer is one kind of SSE stream: the API's event stream, the mission page's drops, a
// dashboard page's rows. serveStream runs the parts every stream shares around it.
type streamer interface {
	// open writes what a new connection starts with (a snapshot, a replay).
	open(ctx context.Context, w *bufio.Writer) error
	// resync catches up after the stream's subscription fell behind and was dropped.
	resync(ctx context.Context, w *bufio.Writer) error
	// event handles one live change-feed event of the stream's scope.
	event(ctx context.Context, w *bufio.Writer, e feed.Event) error
	// drained runs once no more events are queued: the point to send what events gathered.
	drained(ctx context.Context, w *bufio.Writer) error
	// tick runs every tickEvery (never when tickEvery is 0), for coalesced updates.
	tick(ctx context.Context, w *bufio.Writer) error
	tickEvery() time.Duration
}

// errStreamEnd ends a stream cleanly once it has said all it had to (a job's output stream
// after its end event): what was written is flushed and the connection closed.
var errStreamEnd = errors.New("stream complete")

// chunkStreamer is a streamer that also follows live output: serveStream subscribes it to the
// output hub before open, with its filter, and hands it every chunk.
type chunkStreamer interface {
	streamer
	// outputFilter says which chunks the stream follows.
	outputFilter() output.Filter
	// chunk handles one chunk of live output.
	chunk(ctx context.Context, w *bufio.Writer, c db.OutputChunk) error
	// resyncOutput catches up after the output subscription fell behind and was dropped.
	resyncOutput(ctx context.Context, w *bufio.Writer) error
}

// streamCloser is a streamer that must know when its stream ended (its client left, the
// server shut down, or it said all it had to).
type streamCloser interface {
	closed()
}

// serveStream runs an SSE stream of scope for st. It reads everything it needs from c before
// the body writer starts (Fiber reuses c once the handler returns), subscribes before open (so
// nothing that changes meanwhile is lost; something sent twice is harmless), keeps an idle
// connection open with a comment every SSEHeartbeat, and ends on a failed write or flush (the
// client left), a reader that stopped reading for the write timeout, a credential that no
// longer admits the user (looked up again every RecheckEvery), a panic in the writer, or
// server shutdown. A user already holding the most streams allowed gets 429 instead.
//
// It reports whether the stream started. A streamer that is also a streamCloser is told when
// its stream ends, however it ends.
func (s *Server) serveStream(c *fiber.Ctx, scope feed.Scope, st streamer) bool {
	g := s.streams
	user := principalOf(c).UserID
	if !g.acquire(user) {
		c.Set(fiber.HeaderRetryAfter, "10")
		_ = problem(c, fiber.StatusTooManyRequests,
			fmt.Sprintf("you have %d live streams open, the most allowed; close one (another tab or window) and try again", g.cfg.MaxPerUser))
		return false
	}
	recheck := s.streamCredential(c)
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	done := c.Context().Done()
	conn := c.Context().Conn()
	hub, log := s.deps.Hub, s.log
	sub := hub.Subscribe(scope, streamBuffer)
	out, follows := st.(chunkStreamer)
	var outSub *output.Subscription
	if follows && s.deps.Output != nil {
		outSub = s.deps.Output.Subscribe(out.outputFilter(), outputBuffer)
	}
	c.Context().SetBodyStreamWriter(func(raw *bufio.Writer) {
		dw := &deadlineWriter{w: raw, conn: conn, timeout: g.cfg.WriteTimeout}
		if gc, ok := conn.(*guardedConn); ok {
			// Every write of the stream gets the stream's deadline, the connection's own
			// once it ends: the same per-write rule, with the stream's setting.
			defer gc.useStreamWriteTimeout(g.cfg.WriteTimeout)()
		}
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in event stream", "user_id", user, "panic", fmt.Sprint(r))
			}
		}()
		defer g.release(user)
		if cl, ok := st.(streamCloser); ok {
			defer cl.closed()
		}
		defer dw.clear()
		defer func() { sub.Close() }()
		defer func() {
			if outSub != nil {
				outSub.Close()
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if hook := g.writerHook.Load(); hook != nil {
			(*hook)()
		}
		w := bufio.NewWriter(dw)
		if err := st.open(ctx, w); err != nil {
			if errors.Is(err, errStreamEnd) {
				_ = w.Flush()
				return
			}
			log.Debug("event stream open", "err", err)
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
		heartbeat := time.NewTicker(g.cfg.heartbeat)
		defer heartbeat.Stop()
		var recheckC <-chan time.Time
		if recheck != nil {
			t := time.NewTicker(g.cfg.RecheckEvery)
			defer t.Stop()
			recheckC = t.C
		}
		var chunkC <-chan db.OutputChunk
		if outSub != nil {
			chunkC = outSub.C
		}
		var tickC <-chan time.Time
		if every := st.tickEvery(); every > 0 {
			tick := time.NewTicker(every)
			defer tick.Stop()
			tickC = tick.C
		}
		for {
			var err error
			select {
			case <-done:
				return
			case <-heartbeat.C:
				_, err = w.WriteString(": ping\n\n")
			case <-recheckC:
				rctx, rcancel := context.WithTimeout(ctx, streamRecheckTimeout)
				err = recheck(rctx)
				rcancel()
				if err != nil {
					// Fail closed: a lookup that cannot be made ends the stream too; the
					// client reconnects through the authorize middleware.
					log.Info("event stream ended by its credential", "user_id", user, "err", err)
					return
				}
				continue
			case <-tickC:
				err = st.tick(ctx, w)
			case c, ok := <-chunkC:
				if !ok {
					// Fell behind: follow again, then read what was missed from the table.
					outSub = s.deps.Output.Subscribe(out.outputFilter(), outputBuffer)
					chunkC = outSub.C
					err = out.resyncOutput(ctx, w)
					break
				}
				err = out.chunk(ctx, w, c)
				if err == nil && len(chunkC) > 0 {
					continue // batch what is already queued into one flush
				}
			case e, ok := <-sub.C:
				switch {
				case !ok:
					// Fell behind (or the hub stopped): listen again, then catch up.
					select {
					case <-done:
						return
					default:
					}
					sub = hub.Subscribe(scope, streamBuffer)
					err = st.resync(ctx, w)
				default:
					err = st.event(ctx, w, e)
					if err == nil && len(sub.C) > 0 {
						continue // batch what is already queued into one flush
					}
					if err == nil {
						err = st.drained(ctx, w)
					}
				}
			}
			if errors.Is(err, errStreamEnd) {
				_ = w.Flush()
				return
			}
			if err != nil {
				log.Debug("event stream", "err", err)
				return
			}
			if err := w.Flush(); err != nil {
				return
			}
		}
	})
	return true
}
