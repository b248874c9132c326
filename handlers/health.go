package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// readyCacheFor is how long /readyz reuses its last check: the check reads the migration
// tables, and /readyz is public, so a flood of calls costs one check a second.
const readyCacheFor = time.Second

// readyCache remembers the last readiness check. Callers that find it stale wait for one
// check, made by the first of them.
type readyCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
	now func() time.Time
}

func (r *readyCache) check(ctx context.Context, ready func(context.Context) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.at.IsZero() && now.Sub(r.at) < readyCacheFor {
		return r.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	r.err, r.at = ready(ctx), now
	return r.err
}

// healthz answers while the process is up.
func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "version": s.deps.Version})
}

// readyz answers 200 only when the database is reachable and migrations are current.
func (s *Server) readyz(c *fiber.Ctx) error {
	if s.deps.Ready != nil {
		if err := s.ready.check(c.UserContext(), s.deps.Ready); err != nil {
			s.log.Warn("not ready", "err", err)
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "detail": "database unreachable or migrations not current"})
		}
	}
	return c.JSON(fiber.Map{"status": "ready"})
}
