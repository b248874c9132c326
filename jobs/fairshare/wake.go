package fairshare

import (
	"context"
	"fmt"
)

// endedWaitsSQL clears what a queued job waits for when that was the provider or a budget and
// the wait is over: its vehicle, snoozed for the wait, is awake (available and due) but no
// worker has fetched it yet. Such a job is not queued work to choose an org by while its mark
// stands, and River fetches the vehicles of better bands first: left marked until its own
// vehicle came up, a job of a worse band would wait for every better-band backlog of other
// orgs, as if fair share did not exist. Unmarked, it is queued work again, and the next
// dispatch of any band may give it a slot; if the provider or the budget still says no, the
// worker marks it again. It reads the waiting jobs by idx_job_queued_waiting and their
// vehicles by key.
const endedWaitsSQL = `UPDATE sa_job AS j SET waiting_for = NULL
FROM river_job AS v
WHERE j.state = 'queued' AND j.waiting_for IN ('provider_capacity', 'budget')
  AND v.id = j.river_job_id AND v.state = 'available' AND v.scheduled_at <= now()`

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
