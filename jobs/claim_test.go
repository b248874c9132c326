package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/provider"
)

// TestClaimReadsThePromptAndLocksTheOperationInOneStatement: the claim of a queued job returns,
// from its one statement, the job running under the claim, its registry row as it stood (locked
// for the write that follows) and its prompt, so the worker needs no read of its own.
func TestClaimReadsThePromptAndLocksTheOperationInOneStatement(t *testing.T) {
	t.Parallel()
	s, d, org, user := newInternalService(t, "claim")
	ctx := context.Background()
	const text = "what the worker needs, read with its claim"
	sub, err := s.Submit(ctx, SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: text})
	if err != nil {
		t.Fatal(err)
	}
	var queued db.Job
	if err := d.Bun.NewSelect().Model(&queued).Where("id = ?", sub.JobID).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	moved, err := s.claimQueued(ctx, queued.ID, 0, *queued.RiverJobID, "worker-1/claim", false)
	if err != nil {
		t.Fatal(err)
	}
	if moved.State != string(StateRunning) || moved.WorkerClaim == nil || *moved.WorkerClaim != "worker-1/claim" {
		t.Errorf("job after the claim: state %s, claim %v; want running under worker-1/claim", moved.State, moved.WorkerClaim)
	}
	if moved.Prompt.ID != sub.PromptID || moved.Prompt.Body != text || moved.Prompt.OrgID != org {
		t.Errorf("prompt read with the claim: %+v; want %s with body %q", moved.Prompt, sub.PromptID, text)
	}
	// The registry row as the statement read it: still pending, at its first history entry.
	if moved.Op.ID != sub.Operation.OperationID || moved.Op.Status != "pending" || moved.Op.HistorySeq != 1 || moved.Op.TxNow.IsZero() {
		t.Errorf("operation read with the claim: id %s status %s history %d tx_now %s; want %s pending at 1",
			moved.Op.ID, moved.Op.Status, moved.Op.HistorySeq, moved.Op.TxNow, sub.Operation.OperationID)
	}
	var op db.Operation
	if err := d.Bun.NewSelect().Model(&op).Where("id = ?", sub.Operation.OperationID).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if op.Status != "running" || op.HistorySeq != 2 {
		t.Errorf("stored operation: status %s history %d; want running at 2", op.Status, op.HistorySeq)
	}
	// A claim that does not apply reads nothing and changes nothing.
	if _, err := s.claimQueued(ctx, queued.ID, 0, *queued.RiverJobID, "worker-2/claim", false); err != errNoChange {
		t.Errorf("second claim: %v, want errNoChange", err)
	}
}

// newInternalService is a Service on a fresh database with the sim provider, and one member
// (user) of one org, for the tests inside the package.
func newInternalService(t *testing.T, name string) (s *Service, d *dbtest.DB, org, user int64) {
	t.Helper()
	d = dbtest.New(t)
	ctx := context.Background()
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES (?) RETURNING id", name+"-org").Scan(&org); err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO users (org_id, name, role) VALUES (?, ?, 'member') RETURNING id",
		org, name+"-user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	s, err := NewService(Config{DB: d.Bun, Provider: provider.NewSim(provider.SimConfig{}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, d, org, user
}

// TestClaimOfAJobThisProcessClaimedButNobodyRuns: a claim whose commit reached the database
// while its worker saw an error leaves the job running under a fresh heartbeat that no
// execution keeps. The next fetch of its vehicle by the same process reclaims it at once; a
// claim of another process, or one an execution of this process holds, is waited for.
func TestClaimOfAJobThisProcessClaimedButNobodyRuns(t *testing.T) {
	t.Parallel()
	s, d, org, user := newInternalService(t, "orphan-claim")
	ctx := context.Background()
	cases := []struct {
		name     string
		workerID string
		held     bool
		want     claimOutcome
	}{
		{"claimed here, nobody runs it", "w-here", false, claimed},
		{"claimed by another process", "w-elsewhere", false, claimWait},
		{"claimed here and running", "w-here", true, claimWait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub, err := s.Submit(ctx, SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: c.name})
			if err != nil {
				t.Fatal(err)
			}
			var queued db.Job
			if err := d.Bun.NewSelect().Model(&queued).Where("id = ?", sub.JobID).Scan(ctx); err != nil {
				t.Fatal(err)
			}
			lost := "w-here/" + c.name
			if _, err := s.claimQueued(ctx, queued.ID, 0, *queued.RiverJobID, lost, false); err != nil {
				t.Fatal(err)
			}
			if c.held {
				defer s.beats.Add(queued.ID, lost, nil, func() {})()
			}
			res, err := s.claim(ctx, queued.ID, 0, *queued.RiverJobID, c.workerID)
			if err != nil {
				t.Fatal(err)
			}
			if res.outcome != c.want {
				t.Fatalf("claim outcome %d (%s), want %d", res.outcome, res.reason, c.want)
			}
			if c.want == claimed && (res.job.WorkerClaim == nil || *res.job.WorkerClaim == lost || res.job.State != string(StateRunning)) {
				t.Errorf("reclaimed job: state %s claim %v; want running under a new claim", res.job.State, res.job.WorkerClaim)
			}
		})
	}
}
