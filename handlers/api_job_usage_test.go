package handlers

import (
	"testing"
	"time"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/output"
	"asterion/jobs/usage"
)

// TestJobDocumentCarriesUsageAndProgress: a job's document has its progress, the usage of each
// attempt and their sum, and says how a cancel landed.
func TestJobDocumentCarriesUsageAndProgress(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{Jobs: func(cfg *jobs.Config) {
		w, err := output.NewWriter(output.WriterConfig{DB: cfg.DB, FlushEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		m, err := usage.New(usage.Config{DB: cfg.DB, Prices: usage.Prices{"sim-1": {InputPerMTok: 1e6, OutputPerMTok: 1e6}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Output, cfg.Usage = w, m
		cfg.HeartbeatInterval = 50 * time.Millisecond
	}})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	type doc struct {
		State         string  `json:"state"`
		CancelOutcome *string `json:"cancel_outcome"`
		WaitingFor    *string `json:"waiting_for"`
		ScheduledFor  *string `json:"scheduled_for"`
		Progress      struct {
			OutputChunks int `json:"output_chunks"`
			OutputTokens int `json:"output_tokens"`
		} `json:"progress"`
		Usage struct {
			InputTokens  int     `json:"input_tokens"`
			OutputTokens int     `json:"output_tokens"`
			CostUSD      float64 `json:"cost_usd"`
		} `json:"usage"`
		Attempts []struct {
			Attempt    int     `json:"attempt"`
			StartedAt  *string `json:"started_at"`
			FinishedAt *string `json:"finished_at"`
			ErrorKind  *string `json:"error_kind"`
			Usage      struct {
				InputTokens  int    `json:"input_tokens"`
				OutputTokens int    `json:"output_tokens"`
				Model        string `json:"model"`
			} `json:"usage"`
		} `json:"attempts"`
	}
	get := func(id string) doc {
		t.Helper()
		return mustDecode[doc](t, f.do(t, "GET", "/sa-core/v1/jobs/"+id, u.Tok, nil).Body)
	}

	done := f.submit(t, u, "three words here #sim:tokens=12 #sim:latency=200ms")
	f.waitJob(t, u, done.JobID, "succeeded")
	d := get(done.JobID)
	if d.Progress.OutputTokens != 12 || d.Progress.OutputChunks < 1 {
		t.Errorf("progress %+v, want 12 tokens", d.Progress)
	}
	if d.Usage.InputTokens != 3 || d.Usage.OutputTokens != 12 || d.Usage.CostUSD != 15 {
		t.Errorf("usage %+v, want 3 in, 12 out, $15 at $1 a token", d.Usage)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].Attempt != 1 || d.Attempts[0].FinishedAt == nil ||
		d.Attempts[0].Usage.Model != "sim-1" || d.Attempts[0].ErrorKind != nil {
		t.Errorf("attempts %+v", d.Attempts)
	}
	if d.CancelOutcome != nil || d.WaitingFor != nil || d.ScheduledFor != nil {
		t.Errorf("a plain succeeded job: %+v", d)
	}

	// Ten minutes of answer: the cancel below lands mid-answer however slow the machine.
	long := f.submit(t, u, "long #sim:tokens=20000 #sim:latency=10m")
	jobstest.WaitFor(t, 20*time.Second, "progress on the running job", func() bool { return get(long.JobID).Progress.OutputChunks >= 2 })
	running := get(long.JobID)
	if len(running.Attempts) != 1 || running.Attempts[0].FinishedAt != nil || running.Attempts[0].Usage.OutputTokens < 1 {
		t.Errorf("running attempt %+v", running.Attempts)
	}
	if r := f.do(t, "POST", "/sa-core/v1/jobs/"+long.JobID+"/cancel", u.Tok, nil); r.StatusCode != 200 {
		t.Fatalf("cancel: %s", r)
	}
	if c := get(long.JobID); c.State != "cancelled" || c.CancelOutcome == nil || *c.CancelOutcome != jobs.CancelAborted {
		t.Errorf("cancelled mid-answer: state %s, cancel_outcome %v", c.State, c.CancelOutcome)
	}
}
