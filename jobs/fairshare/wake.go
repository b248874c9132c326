package fairshare

import (
	"context"
	"fmt"
)

// ClearEndedWaits makes the jobs whose wait for the provider or a budget is over queued work
// to choose an org by again, and returns how many there were. The leader runs it every few
// seconds.
func (s *Share) ClearEndedWaits(ctx context.Context) (int, error) {
	res, err := s.cfg.DB.DB.ExecContext(ctx, endedWaitsSQL)
	if err != nil {
		return 0, fmt.Errorf("clear the provider and budget waits that are over: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
