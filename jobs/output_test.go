package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/maintenance"
	"asterion/jobs/output"
	"asterion/jobs/provider"
)

// withOutput gives a service a live output writer that flushes every 20 ms.
func withOutput(t *testing.T) func(*jobs.Config) {
	return func(cfg *jobs.Config) {
		w, err := output.NewWriter(output.WriterConfig{DB: cfg.DB, Logger: jobstest.Discard, FlushEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Output = w
	}
}

func (e *tenv) output(j db.Job) []db.OutputChunk {
	e.T.Helper()
	cs, err := db.OutputAfter(context.Background(), e.D.Bun, j.ID, j.Attempt, 0, 1000)
	if err != nil {
		e.T.Fatal(err)
	}
	return cs
}

func joined(cs []db.OutputChunk) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestStreamedJobOutput: a job's chunks are numbered 1..n without a gap, and a succeeded job's
// response is exactly their concatenation; archiving the job moves its output with it.
func TestStreamedJobOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), withOutput(t))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("write #sim:tokens=40 #sim:latency=400ms")
	jobstest.WaitFor(t, 20*time.Second, "the job to succeed", func() bool { return e.Job(sub.JobID).State == "succeeded" })
	job := e.Job(sub.JobID)
	cs := e.output(job)
	if len(cs) < 2 {
		t.Fatalf("%d chunks for 40 words over 400 ms, want them written as they came", len(cs))
	}
	for i, c := range cs {
		if c.Seq != i+1 || c.Attempt != 1 {
			t.Fatalf("chunk %d is seq %d of attempt %d", i, c.Seq, c.Attempt)
		}
	}
	var resp db.Entity
	if err := e.D.Bun.NewSelect().Model(&resp).Where("id = ?", *job.ResponseID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if joined(cs) != resp.Body || len(strings.Fields(resp.Body)) != 40 {
		t.Errorf("chunks make %q, the response is %q", joined(cs), resp.Body)
	}

	if _, err := maintenance.ArchiveOldJobs(context.Background(), e.D.Bun, time.Now().Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	var archived int
	if err := e.D.Bun.NewSelect().TableExpr("sa_job_output_archive").ColumnExpr("count(*)").
		Where("job_id = ?", job.ID).Scan(context.Background(), &archived); err != nil {
		t.Fatal(err)
	}
	if archived != len(cs) {
		t.Errorf("%d chunks archived, want %d", archived, len(cs))
	}
}

// TestCancelMidAnswerKeepsThePartialOutput: cancelling a job while its answer streams cuts the
// call, keeps what it had written and records that the call was aborted; a job cancelled
// before it started records that instead.
func TestCancelMidAnswerKeepsThePartialOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), withOutput(t))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	// The answer would run for ten minutes: an execution that ends within the test ended
	// because of the cancel, and its output is a strict beginning of the answer.
	sub := e.Submit("long #sim:tokens=2000 #sim:latency=10m")
	jobstest.WaitFor(t, 20*time.Second, "the first chunks", func() bool {
		j := e.Job(sub.JobID)
		return j.State == "running" && len(e.output(j)) >= 2
	})
	if _, err := e.S.Cancel(context.Background(), e.V, sub.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	job := e.Job(sub.JobID)
	if job.State != "cancelled" || job.CancelOutcome == nil || *job.CancelOutcome != jobs.CancelAborted {
		t.Fatalf("cancelled job: state %s outcome %v", job.State, job.CancelOutcome)
	}
	// The worker's execution ends once River's cancellation reaches it, with what it wrote.
	jobstest.WaitFor(t, 30*time.Second, "the execution to end", func() bool {
		var n int
		_ = e.D.Bun.NewSelect().TableExpr("river_job").ColumnExpr("count(*)").Where("state = 'running'").Scan(context.Background(), &n)
		return n == 0
	})
	partial := joined(e.output(job))
	full := provider.NewSim(provider.SimConfig{})
	resp, err := full.Complete(context.Background(), provider.Request{Text: "long #sim:tokens=2000"})
	if err != nil {
		t.Fatal(err)
	}
	if partial == "" || !strings.HasPrefix(resp.Text, partial) || len(partial) >= len(resp.Text) {
		t.Errorf("kept %q, want a non-empty beginning of the answer", partial)
	}

}

// TestCancelBeforeStartRecordsIt: a job cancelled while queued (no worker runs here) records
// that it never reached the provider.
func TestCancelBeforeStartRecordsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	sub := e.Submit("never runs")
	if _, err := e.S.Cancel(context.Background(), e.V, sub.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := e.Job(sub.JobID).CancelOutcome; got == nil || *got != jobs.CancelBeforeStart {
		t.Errorf("cancel of a queued job: outcome %v, want %s", got, jobs.CancelBeforeStart)
	}
}
