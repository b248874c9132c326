package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
