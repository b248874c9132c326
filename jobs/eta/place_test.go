package eta_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/eta"
	"asterion/jobs/jobstest"
)

// TestETAPlaceInRiverOrder: with no worker running, the estimate follows River's order (band,
// then oldest first): a bulk job waits behind every default one, an urgent one submitted last
// goes first, a scheduled one waits for its time; the batch read agrees with the single one,
// and the operation's estimate is its job's. The count walks idx_job_queued_band.
func TestETAPlaceInRiverOrder(t *testing.T) {
	t.Parallel()
	env := jobstest.NewEnv(t, jobstest.InstantSim())
	s, d := env.S, env.D
	ctx := context.Background()
	submit := func(text string, priority int, at *time.Time) jobs.Submitted {
		t.Helper()
		return env.Submit(text, func(r *jobs.SubmitRequest) { r.Priority, r.ScheduledFor = &priority, at })
	}
	bulk := submit("bulk", 80, nil)
	var defaults []jobs.Submitted
	for range 5 {
		defaults = append(defaults, submit("default", 50, nil))
	}
	urgent := submit("urgent", 5, nil)
	later := time.Now().Add(time.Hour)
	scheduled := submit("scheduled", 5, &later)

	est := s.ETAs()
	estimate := func(id uuid.UUID) eta.ETA {
		t.Helper()
		got, ok, err := est.Job(ctx, id)
		if err != nil || !ok {
			t.Fatalf("eta of %s: %v %v", id, ok, err)
		}
		return got
	}
	// No worker, nothing measured: one slot of DefaultRun (2 s); the first in line starts now.
	if got := estimate(urgent.JobID); got.Seconds != 0 || !got.Starts {
		t.Errorf("urgent, first in line: %+v", got)
	}
	for i, sub := range defaults {
		if got, want := estimate(sub.JobID).Seconds, 2*(i+1); got != want {
			t.Errorf("default %d, behind the urgent one and %d others: %d s, want %d", i, i, got, want)
		}
	}
	if got := estimate(bulk.JobID).Seconds; got != 12 {
		t.Errorf("bulk, submitted first but sixth ahead: %d s, want 12", got)
	}
	if got := estimate(scheduled.JobID); got.Seconds < 3590 || got.Seconds > 3601 || got.ScheduledFor == nil ||
		got.ScheduledFor.Sub(later).Abs() > time.Millisecond {
		t.Errorf("scheduled in an hour: %+v", got)
	}
	ids := []uuid.UUID{bulk.JobID, urgent.JobID, scheduled.JobID, defaults[2].JobID, uuid.New()}
	batch, err := est.Jobs(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 4 {
		t.Errorf("batch of 4 jobs and an unknown id: %v", batch)
	}
	for _, id := range ids[:4] {
		if one := estimate(id); batch[id].Seconds-one.Seconds > 1 || one.Seconds-batch[id].Seconds > 1 {
			t.Errorf("job %s: batch %+v, single %+v", id, batch[id], one)
		}
	}
	if op, ok, err := est.Operation(ctx, defaults[4].Operation.OperationID); err != nil || !ok || op.Seconds != 10 {
		t.Errorf("the operation of the last default job: %+v %v %v", op, ok, err)
	}
	if _, ok, err := est.Operation(ctx, uuid.New()); err != nil || ok {
		t.Errorf("an unknown operation: %v %v", ok, err)
	}
	// Past a bound of 3 the place is extrapolated from the queued total (8 jobs): the last
	// default job has 6 ahead, estimated between the bound and the total.
	capped, err := eta.New(eta.Config{DB: d.Bun, CountCap: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := capped.Job(ctx, defaults[4].JobID); err != nil || !ok || got.Seconds < 2*3 || got.Seconds > 2*8 {
		t.Errorf("the last default job past a bound of 3: %+v %v %v, want 6..16 s", got, ok, err)
	}
	// The place is an index range, not a scan of the queue.
	var plan []string
	rows, err := d.Bun.QueryContext(ctx, "EXPLAIN "+eta.JobSQL, bulk.JobID, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan = append(plan, line)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "using idx_job_queued_band") || !strings.Contains(p, "Index Cond: (ROW(") {
		t.Errorf("the place count does not use idx_job_queued_band:\n%s", strings.Join(plan, "\n"))
	}
}
