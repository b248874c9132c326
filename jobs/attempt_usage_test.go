package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// withMeter gives a service a usage meter with a price table and no status cache.
func withMeter(t *testing.T, m **usage.Meter) func(*jobs.Config) {
	return func(cfg *jobs.Config) {
		meter, err := usage.New(usage.Config{DB: cfg.DB, StatusTTL: -1,
			Prices: usage.Prices{"sim-1": {InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Usage = meter
		*m = meter
	}
}

// TestAttemptUsage: the sim's word counts land on every attempt, failed ones included, and
// sum on the job with the price table's cost.
func TestAttemptUsage(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("count these four words #sim:tokens=7 #sim:fail=provider_5xx:1")
	jobstest.WaitFor(t, 30*time.Second, "the job to succeed", func() bool { return e.Job(sub.JobID).State == "succeeded" })
	rows, total, err := m.JobAttempts(context.Background(), sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d attempt rows, want 2: %+v", len(rows), rows)
	}
	if rows[0].ErrorKind == nil || *rows[0].ErrorKind != "provider_5xx" || rows[1].ErrorKind != nil {
		t.Errorf("attempt kinds %v, %v", rows[0].ErrorKind, rows[1].ErrorKind)
	}
	if rows[1].InputTokens != 4 || rows[1].OutputTokens != 7 || rows[1].Model != "sim-1" {
		t.Errorf("successful attempt %+v, want 4 in, 7 out of sim-1", rows[1])
	}
	if total.InputTokens != int64(rows[0].InputTokens+4) || total.CostUSD != float64(total.InputTokens)+2*float64(total.OutputTokens) {
		t.Errorf("job total %+v over %+v", total, rows)
	}
}

// TestCutStreamRecordsWhatWasCounted: a cancel mid-answer records the words written so far.
func TestCutStreamRecordsWhatWasCounted(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m), withOutput(t))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	sub := e.Submit("cut me #sim:tokens=100 #sim:latency=20s")
	jobstest.WaitFor(t, 20*time.Second, "output to flow", func() bool { return len(e.output(e.Job(sub.JobID))) >= 2 })
	if _, err := e.S.Cancel(context.Background(), e.V, sub.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	var rows []db.Attempt
	jobstest.WaitFor(t, 10*time.Second, "the cut attempt's usage", func() bool {
		var err error
		rows, _, err = m.JobAttempts(context.Background(), sub.JobID)
		return err == nil && len(rows) == 1
	})
	// The usage counts every word the provider wrote; the stored output may lack the last
	// ones, written after the cancel reached the job row.
	written := len(strings.Fields(joined(e.output(e.Job(sub.JobID)))))
	if rows[0].InputTokens != 2 || rows[0].OutputTokens < written || rows[0].OutputTokens >= 100 {
		t.Errorf("cut attempt %+v, %d words stored", rows[0], written)
	}
}

// TestSuccessUsageCountedOnce: a success's usage, which travels in its finish's statement,
// lands once on the attempt rows, on the org's day and month totals and on the process's
// counters, for every job of a batch.
func TestSuccessUsageCountedOnce(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 3)
	const n = 6
	var ids []string
	for range n {
		ids = append(ids, e.Submit("three words here #sim:tokens=5").JobID.String())
	}
	jobstest.WaitFor(t, 30*time.Second, "every job to succeed", func() bool {
		var done int
		err := e.D.Bun.NewRaw(`SELECT count(*) FROM sa_job WHERE id::text IN (?) AND state = 'succeeded'`, bun.List(ids)).Scan(context.Background(), &done)
		return err == nil && done == n
	})
	var attempts, day, month int64
	if err := e.D.Bun.NewRaw(`SELECT
    (SELECT count(*) FROM sa_attempt WHERE org_id = ?0),
    (SELECT coalesce(sum(tokens), 0) FROM sa_usage_period WHERE org_id = ?0 AND period = 'day'),
    (SELECT coalesce(sum(tokens), 0) FROM sa_usage_period WHERE org_id = ?0 AND period = 'month')`, e.O).
		Scan(context.Background(), &attempts, &day, &month); err != nil {
		t.Fatal(err)
	}
	// Each job reads 3 words and writes 5 tokens.
	if attempts != n || day != n*8 || month != n*8 {
		t.Errorf("%d attempts, %d tokens today, %d this month; want %d, %d, %d", attempts, day, month, n, n*8, n*8)
	}
	if got := m.Recorded()["sim-1"]; got.InputTokens != n*3 || got.OutputTokens != n*5 {
		t.Errorf("the meter counted %+v, want %d in and %d out", got, n*3, n*5)
	}
}
