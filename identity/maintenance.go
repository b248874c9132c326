package identity

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// PurgeResult counts what one Purge deleted.
type PurgeResult struct {
	Sessions       int
	SignInFailures int
}

// Purge deletes expired sessions and failed sign-ins older than the window. Expired sessions
// already count for nothing (SessionPrincipal checks the expiry); this keeps the tables small.
// Several processes may purge at once: each delete is idempotent.
func (s *Service) Purge(ctx context.Context) (PurgeResult, error) {
	var r PurgeResult
	res, err := s.db.DB.ExecContext(ctx, purgeSessionsSQL)
	if err != nil {
		return r, fmt.Errorf("purge expired sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	r.Sessions = int(n)
	res, err = s.db.DB.ExecContext(ctx, purgeSignInFailuresSQL, s.cfg.SignInWindow.Microseconds())
	if err != nil {
		return r, fmt.Errorf("purge old sign-in failures: %w", err)
	}
	n, _ = res.RowsAffected()
	r.SignInFailures = int(n)
	return r, nil
}

// RunMaintenance purges every Config.PurgeInterval, first at once, until ctx ends. The server
// runs it on its own timer rather than as a River periodic job: River's periodic jobs run on the
// leader only, and this work needs no coordination.
func (s *Service) RunMaintenance(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(s.cfg.PurgeInterval)
	defer t.Stop()
	for {
		r, err := s.Purge(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("identity purge", "err", err)
		case r.Sessions > 0 || r.SignInFailures > 0:
			log.Info("identity purge", "expired_sessions", r.Sessions, "old_sign_in_failures", r.SignInFailures)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
