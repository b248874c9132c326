package handlers

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/feed"
)

// preferredWait reads c's Prefer: wait on a route that honours it. When the header asks for a
// wait and the caller has a stream slot free, the request takes the slot for as long as it
// waits (a held request costs the server what a stream costs), its deadline is pushed back by
// the wait, and the seconds come back with the release of the slot. When every slot of the
// caller is taken the answer is 0: the request is answered at once, as without the header,
// which RFC 7240 allows (a preference may be ignored) and which loses nothing the caller sent.
func (s *Server) preferredWait(c *fiber.Ctx) (wait int, release func()) {
	wait = parsePreferWait(c.GetReqHeaders()["Prefer"])
	if wait == 0 {
		return 0, func() {}
	}
	user := principalOf(c).UserID
	if !s.streams.acquire(user) {
		s.log.Debug("Prefer: wait not honoured: every stream slot of the caller is taken", "user_id", user)
		return 0, func() {}
	}
	stretchDeadline(c, time.Duration(wait)*time.Second)
	return wait, func() { s.streams.release(user) }
}

// awaitTerminal holds a request for up to wait until isDone reports true, holding no database
// connection meanwhile: it listens on the change feed for the events concern matches, and calls
// isDone once at the start and once per such event (and after a lag). It returns whether isDone
// held in time.
func (s *Server) awaitTerminal(ctx context.Context, scope feed.Scope, concern func(feed.Event) bool, wait time.Duration,
	isDone func(ctx context.Context) (bool, error)) (bool, error) {
	scope.Topics = nil
	sub := s.deps.Hub.Subscribe(scope, 64)
	defer func() { sub.Close() }()
	if done, err := isDone(ctx); err != nil || done {
		return done, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case e, ok := <-sub.C:
			if !ok {
				sub = s.deps.Hub.Subscribe(scope, 64)
			} else if !concern(e) {
				continue
			}
			if done, err := isDone(ctx); err != nil || done {
				return done, err
			}
		}
	}
}

// aboutJob and aboutOperation match the events of one job or one operation (a prompt
// operation's changes ride on its job's events).
func aboutJob(id uuid.UUID) func(feed.Event) bool {
	return func(e feed.Event) bool { return e.JobID != nil && *e.JobID == id }
}

func aboutOperation(id uuid.UUID) func(feed.Event) bool {
	return func(e feed.Event) bool { return e.OperationID != nil && *e.OperationID == id }
}

// awaitJob waits up to wait seconds for a job to end and returns it when it did.
func (s *Server) awaitJob(ctx context.Context, v jobs.Viewer, id uuid.UUID, wait int) (db.Job, bool, error) {
	var job db.Job
	done, err := s.awaitTerminal(ctx, v.Scope(), aboutJob(id), time.Duration(wait)*time.Second,
		func(ctx context.Context) (bool, error) {
			j, err := s.deps.Reads.FindJob(ctx, v, id)
			if err != nil {
				return false, err
			}
			job = j
			return jobs.State(j.State).Terminal(), nil
		})
	return job, done, err
}

// waitedResult is what a submit that waited adds to its answer: the response, or the error.
func (s *Server) waitedResult(c *fiber.Ctx, v jobs.Viewer, j db.Job) (fiber.Map, error) {
	if j.State == string(jobs.StateSucceeded) {
		r, err := s.deps.Reads.Response(c.UserContext(), v, j)
		if err != nil {
			return nil, err
		}
		return fiber.Map{"response": fiber.Map{"response_id": r.ID, "text": r.Body}}, nil
	}
	kind, msg := "unknown", j.State
	if j.ErrorKind != nil {
		kind = *j.ErrorKind
	}
	if j.ErrorMessage != nil && *j.ErrorMessage != "" {
		msg = *j.ErrorMessage
	}
	return fiber.Map{"error": fiber.Map{"kind": kind, "message": msg}}, nil
}
