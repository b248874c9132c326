package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"
)

// errClientGone ends the context of a request whose client closed its connection.
var errClientGone = errors.New("the client closed the connection")

// requestDeadline gives every request a context that ends after Limits.RequestTimeout or as soon
// as the client is seen to have closed its connection (fasthttp does not notice that by itself
// while a handler runs), so that the queries it runs end with it (db closes a connection whose
// statement's context ends, and PostgreSQL then stops the statement).
//
// A request that asks to wait (Prefer: wait=N) on a route that honours it gets N more seconds,
// given by its handler through stretchDeadline once it decides to wait; the header alone
// changes nothing.
//
// A chat completion or a response of the OpenAI-compatible front door waits while its job
// runs: it has no deadline but the job's own timeout, and ends when its client leaves.
//
// A stream is exempt by construction: its handler returns at once and its body writer runs
// after, on a context of its own. A body writer must never use c.UserContext(), which ends when
// the handler returns.
func (s *Server) requestDeadline(c *fiber.Ctx) error {
	parent := c.UserContext()
	base, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	if gc, ok := c.Context().Conn().(*guardedConn); ok {
		stop := gc.watchPeer(func() { cancel(errClientGone) })
		defer stop()
	}
	clock := &requestClock{base: base, deadline: time.Now().Add(s.deps.Limits.RequestTimeout)}
	defer clock.stop()
	ctx := context.Context(base)
	if !waitsForItsJob(c) {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithDeadline(base, clock.deadline)
		clock.cancels = append(clock.cancels, cancelTimeout)
	}
	c.Locals(requestClockKey{}, clock)
	c.SetUserContext(ctx)
	err := c.Next()
	// The handler may have stretched the deadline (stretchDeadline): the context to ask is the
	// one it ended with.
	ctx = c.UserContext()
	// The error handler runs after this returns and renders with the user context: give it
	// back the parent, and keep why the request's context ended, if it did, for the answer.
	// The driver's socket deadline is the context's deadline, so a statement may fail a hair
	// before the context's own timer marks it done: a deadline in the past counts as reached.
	if cause := context.Cause(ctx); cause != nil {
		c.Locals(endCauseKey{}, cause)
	} else if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		c.Locals(endCauseKey{}, context.DeadlineExceeded)
	}
	c.SetUserContext(parent)
	return err
}

// requestClock is a request's deadline, kept so that a handler that honours Prefer: wait can
// push it back by the wait, and only by that.
type requestClock struct {
	// base is the request's context before its deadline: it ends only when the client leaves.
	base     context.Context
	deadline time.Time
	cancels  []context.CancelFunc
}

func (k *requestClock) stop() {
	for _, cancel := range k.cancels {
		cancel()
	}
}

type requestClockKey struct{}

// stretchDeadline moves the deadline of c's request back by extra: the request's context
// becomes one that ends extra later than it would have (or when the client leaves). Only a
// handler that honours Prefer: wait calls it, with the wait the header asked for; every other
// route keeps Limits.RequestTimeout whatever the request's headers say.
func stretchDeadline(c *fiber.Ctx, extra time.Duration) {
	clock, ok := c.Locals(requestClockKey{}).(*requestClock)
	if !ok || extra <= 0 {
		return
	}
	clock.deadline = clock.deadline.Add(extra)
	ctx, cancel := context.WithDeadline(clock.base, clock.deadline)
	clock.cancels = append(clock.cancels, cancel)
	c.SetUserContext(ctx)
}

type endCauseKey struct{}

// requestEndCause is why the request's context ended before its handler returned (its deadline
// or errClientGone), or nil.
func requestEndCause(c *fiber.Ctx) error {
	err, _ := c.Locals(endCauseKey{}).(error)
	return err
}

// requestTimedOut reports whether c's request context ended at its deadline.
func requestTimedOut(c *fiber.Ctx) bool {
	return errors.Is(requestEndCause(c), context.DeadlineExceeded)
}

// waitsForItsJob reports whether c's caller waits while the job it asked for runs (a chat
// completion, a response): its request has no deadline but the job's own timeout, and ends when its
// client leaves.
func waitsForItsJob(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodPost && (c.Path() == chatCompletionsPath || c.Path() == responsesPath)
}
