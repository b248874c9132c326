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
// A stream is exempt by construction: its handler returns at once and its body writer runs
// after, on a context of its own. A body writer must never use c.UserContext(), which ends when
// the handler returns.
func (s *Server) requestDeadline(c *fiber.Ctx) error {
	// A request that asks to wait (Prefer: wait=N) is exempt from the deadline for as long.
	timeout := s.deps.Limits.RequestTimeout + time.Duration(parsePreferWait(c.GetReqHeaders()["Prefer"]))*time.Second
	ctx, cancelTimeout := c.UserContext(), context.CancelFunc(func() {})
	if !waitsForItsJob(c) {
		ctx, cancelTimeout = context.WithTimeout(ctx, timeout)
	}
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if gc, ok := c.Context().Conn().(*guardedConn); ok {
		stop := gc.watchPeer(func() { cancel(errClientGone) })
		defer stop()
	}
	parent := c.UserContext()
	c.SetUserContext(ctx)
	err := c.Next()
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

// waitsForItsJob reports whether c's caller waits while the job it asked for runs (a chat
// completion): its request has no deadline but the job's own timeout, and ends when its
// client leaves.
func waitsForItsJob(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodPost && c.Path() == chatCompletionsPath
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
