package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/chain"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
)

// submitChain submits a chain as the env's member and fails the test on error.
func (e *tenv) submitChain(req chain.Request) chain.Accepted {
	e.T.Helper()
	req.Viewer = e.V
	out, err := e.c.Submit(context.Background(), req)
	if err != nil {
		e.T.Fatalf("SubmitChain: %v", err)
	}
	return out
}

// waitChain waits until the chain is in one of states.
func (e *tenv) waitChain(id uuid.UUID, timeout time.Duration, states ...string) chain.Detail {
	e.T.Helper()
	var d chain.Detail
	jobstest.WaitFor(e.T, timeout, "chain "+id.String()+" to be "+strings.Join(states, "|"), func() bool {
		var err error
		d, err = e.c.Get(context.Background(), e.V, id)
		if err != nil {
			e.T.Fatalf("GetChain: %v", err)
		}
		for _, s := range states {
			if d.Chain.State == s {
				return true
			}
		}
		return false
	})
	return d
}

func (e *tenv) entity(id uuid.UUID) db.Entity {
	e.T.Helper()
	var en db.Entity
	if err := e.D.Bun.NewSelect().Model(&en).Where("id = ?", id).Scan(context.Background()); err != nil {
		e.T.Fatalf("read entity %s: %v", id, err)
	}
	return en
}

func steps(texts ...string) []chain.Step {
	out := make([]chain.Step, len(texts))
	for i, t := range texts {
		out[i] = chain.Step{Prompt: t, IncludePrevious: i > 0}
	}
	return out
}

func TestChainThreeStepsResumeInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	start := time.Now()
	acc := e.submitChain(chain.Request{Steps: steps("alpha", "beta", "gamma")})
	h := jobstest.ValidHandleDoc(t, acc.Operation)
	if acc.Rejected || h["kind"] != chain.Kind || h["status"] != "running" || h["cancel_href"] == nil {
		t.Fatalf("accepted chain handle %v", h)
	}
	if want := deferred.OperationID(chain.Kind, chain.OwnerName,
		map[string]string{"chain_id": acc.Chain.ID.String()}, ""); acc.Operation.OperationID != want {
		t.Errorf("chain operation id %s, want the deterministic %s", acc.Operation.OperationID, want)
	}
	d := e.waitChain(acc.Chain.ID, 20*time.Second, chain.Completed, chain.Failed)
	t.Logf("three steps ran in %s", time.Since(start))
	if d.Chain.State != chain.Completed {
		t.Fatalf("chain %s: %s", d.Chain.State, d.Chain.Diagnostic)
	}
	var responses []uuid.UUID
	var prevResp *db.Entity
	var prevFinished time.Time
	for i, st := range d.Steps {
		if st.State != "completed" || st.OperationStatus != "completed" || st.ResponseID == nil || st.JobID == nil {
			t.Fatalf("step %d: %+v", i+1, st)
		}
		job := e.Job(*st.JobID)
		prompt := e.entity(*st.PromptID)
		resp := e.entity(*st.ResponseID)
		want := []string{"alpha", "beta", "gamma"}[i]
		if prevResp != nil {
			want += "\n\nPrevious response:\n" + prevResp.Body
			if job.CreatedAt.Before(prevFinished) {
				t.Errorf("step %d was submitted at %s, before step %d finished at %s", i+1, job.CreatedAt, i, prevFinished)
			}
			if prompt.ParentID == nil || *prompt.ParentID != prevResp.ID {
				t.Errorf("step %d prompt's parent %v, want the previous response %s", i+1, prompt.ParentID, prevResp.ID)
			}
		}
		if prompt.Body != want {
			t.Errorf("step %d prompt %q, want %q", i+1, prompt.Body, want)
		}
		if prompt.CorrelationID != acc.Chain.ID {
			t.Errorf("step %d correlation %s, want the chain id", i+1, prompt.CorrelationID)
		}
		op := e.Operation(*st.OperationID)
		if op.ContinuationDigest == nil || len(*op.ContinuationDigest) != 64 {
			t.Errorf("step %d operation has no continuation digest", i+1)
		}
		responses = append(responses, *st.ResponseID)
		prevResp, prevFinished = &resp, *job.FinishedAt
	}
	// The sim provider echoes the prompt: the last answer carries all three in order.
	if got, want := prevResp.Body, "Simulated answer to: gamma Previous response: Simulated answer to: beta Previous response: Simulated answer to: alpha"; got != want {
		t.Errorf("last response %q, want %q", got, want)
	}
	st := jobstest.ValidStatusDoc(t, d.Status)
	res, _ := st["result"].(map[string]any)
	if st["status"] != "completed" || res["chain_id"] != acc.Chain.ID.String() {
		t.Fatalf("chain status %v", st)
	}
	gotResp, _ := json.Marshal(res["responses"])
	wantResp, _ := json.Marshal(responses)
	if string(gotResp) != string(wantResp) {
		t.Errorf("result responses %s, want %s", gotResp, wantResp)
	}
	if n := e.Count("SELECT count(*) FROM sa_operation_continuation"); n != 0 {
		t.Errorf("%d continuations left after the chain completed", n)
	}
	if got := strings.Join(e.HistoryStatuses(acc.Chain.OperationID), ","); got != "running,completed" {
		t.Errorf("chain history %s", got)
	}
	det, err := jobstest.NewReads(t, e.S).GetOperation(context.Background(), e.Op, acc.Chain.OperationID)
	if err != nil || det.ChainBrokenAt != -1 || det.Operation.ContinuationDigest == nil {
		t.Errorf("chain operation detail: %v, broken at %d, digest %v", err, det.ChainBrokenAt, det.Operation.ContinuationDigest)
	}
}

func TestChainFailingMiddleStepFailsWithDiagnostic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	acc := e.submitChain(chain.Request{Steps: steps("one", "two #sim:fail=provider_4xx", "three")})
	d := e.waitChain(acc.Chain.ID, 20*time.Second, chain.Completed, chain.Failed)
	if d.Chain.State != chain.Failed {
		t.Fatalf("chain %s, want failed", d.Chain.State)
	}
	var diag chain.Diagnostic
	if err := json.Unmarshal(d.Chain.Diagnostic, &diag); err != nil {
		t.Fatal(err)
	}
	if diag.Step != 2 || diag.StepCount != 3 || diag.Status != "failed" || diag.ErrorKind != "provider_4xx" ||
		!strings.HasPrefix(diag.Message, "step 2 of 3 ended failed (provider_4xx)") || diag.Operation == nil ||
		*diag.Operation != *d.Steps[1].OperationID {
		t.Fatalf("diagnostic %+v", diag)
	}
	digest, err := deferred.CanonicalDigest(diag)
	if err != nil {
		t.Fatal(err)
	}
	if d.Operation.DiagnosticsDigest == nil || *d.Operation.DiagnosticsDigest != digest {
		t.Errorf("diagnostics digest %v, want %s", d.Operation.DiagnosticsDigest, digest)
	}
	if got := []string{d.Steps[0].State, d.Steps[1].State, d.Steps[2].State}; strings.Join(got, ",") != "completed,failed,skipped" {
		t.Errorf("step states %v", got)
	}
	if d.Steps[2].PromptID != nil {
		t.Errorf("step 3 was submitted after step 2 failed")
	}
	st := jobstest.ValidStatusDoc(t, d.Status)
	errObj, _ := st["error"].(map[string]any)
	if st["status"] != "failed" || errObj["kind"] != "step_failed" || !strings.Contains(errObj["message"].(string), "step 2") {
		t.Errorf("chain status %v", st)
	}
	if n := e.Count("SELECT count(*) FROM sa_job WHERE prompt_id IN (SELECT id FROM sa_entity WHERE correlation_id = ?)", acc.Chain.ID); n != 2 {
		t.Errorf("%d jobs ran, want 2", n)
	}
}

func TestChainRejectAsFailureFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	acc := e.submitChain(chain.Request{Steps: steps("first", "second"), Mode: chain.ModeReject})
	if !acc.Rejected {
		t.Fatalf("a reject-as-failure chain was accepted: %+v", acc)
	}
	st := jobstest.ValidStatusDoc(t, acc.Status)
	errObj, _ := st["error"].(map[string]any)
	if st["status"] != "failed" || st["terminal"] != true || errObj["kind"] != "deferred_rejected" ||
		!strings.Contains(errObj["message"].(string), "reject-as-failure") {
		t.Fatalf("status %v", st)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity"); n != 0 {
		t.Errorf("%d prompts written for a rejected chain", n)
	}
	d, err := e.c.Get(context.Background(), e.V, acc.Chain.ID)
	if err != nil || d.Chain.State != chain.Failed || d.Steps[0].State != "skipped" || d.Operation.DiagnosticsDigest == nil {
		t.Fatalf("chain %+v: %v", d.Chain, err)
	}
	if got := strings.Join(e.HistoryStatuses(acc.Chain.OperationID), ","); got != "pending,failed" {
		t.Errorf("history %s", got)
	}
}

func TestChainCancelWhileSuspended(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	acc := e.submitChain(chain.Request{Steps: steps("#sim:hang first", "second")})
	d, _ := e.c.Get(context.Background(), e.V, acc.Chain.ID)
	e.WaitState(*d.Steps[0].JobID, jobs.StateRunning, 10*time.Second)
	doc, err := e.S.CancelOperation(context.Background(), e.V, acc.Chain.OperationID, jobs.Actor{Name: "test"})
	if err != nil {
		t.Fatalf("cancel chain: %v", err)
	}
	if st := jobstest.ValidStatusDoc(t, doc); st["status"] != "cancelled" {
		t.Fatalf("status %v", st)
	}
	d, _ = e.c.Get(context.Background(), e.V, acc.Chain.ID)
	if d.Chain.State != chain.Cancelled || d.Steps[0].State != "cancelled" || d.Steps[1].State != "skipped" {
		t.Fatalf("chain %s steps %s/%s", d.Chain.State, d.Steps[0].State, d.Steps[1].State)
	}
	if j := e.Job(*d.Steps[0].JobID); j.State != string(jobs.StateCancelled) {
		t.Errorf("step 1 job %s, want cancelled", j.State)
	}
	if n := e.Count("SELECT count(*) FROM sa_operation_continuation"); n != 0 {
		t.Errorf("%d continuations left after cancel", n)
	}
	// With no continuation left nothing can start step 2: its job is checked now, not after a
	// sleep that would only make the claim look stronger.
	if n := e.Count("SELECT count(*) FROM sa_job"); n != 1 {
		t.Errorf("%d jobs, want only step 1's", n)
	}
}

// TestChainCancelRidesOutABriefLockOnTheStepJob holds the running step's job row locked, as a
// heartbeat or a settling worker does for a moment: a cancel arriving then succeeds once the
// lock is gone, and one facing a lock that never goes away is refused as busy, not hung.
func TestChainCancelRidesOutABriefLockOnTheStepJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	lockJob := func(id uuid.UUID) bun.Tx {
		tx, err := e.D.Bun.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(context.Background(), "SELECT 1 FROM sa_job WHERE id = ? FOR UPDATE", id); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	for _, tc := range []struct {
		name     string
		wantBusy bool
	}{
		// The brief lock goes once the cancel has been refused as busy once (the registry's
		// count of busy retries says so); the other stays until the cancel has given up.
		{"brief lock", false},
		{"lock outlasting the retries", true},
	} {
		acc := e.submitChain(chain.Request{Steps: steps("#sim:hang first", "second")})
		d, _ := e.c.Get(context.Background(), e.V, acc.Chain.ID)
		e.WaitState(*d.Steps[0].JobID, jobs.StateRunning, 10*time.Second)
		tx := lockJob(*d.Steps[0].JobID)
		retries := e.S.Stats().BusyRetries.Load()
		type answer struct {
			doc deferred.StatusDoc
			err error
		}
		got := make(chan answer, 1)
		go func() {
			doc, err := e.S.CancelOperation(context.Background(), e.V, acc.Chain.OperationID, jobs.Actor{Name: "test"})
			got <- answer{doc, err}
		}()
		if !tc.wantBusy {
			jobstest.WaitFor(t, 20*time.Second, "a busy refusal of the cancel", func() bool {
				return e.S.Stats().BusyRetries.Load() > retries
			})
			_ = tx.Rollback()
		}
		a := <-got
		if tc.wantBusy {
			_ = tx.Rollback()
		}
		doc, err := a.doc, a.err
		var refused *jobs.ErrNotCancelable
		if tc.wantBusy {
			if !errors.As(err, &refused) || !refused.Busy {
				t.Errorf("%s: cancel gave %v, want a busy refusal", tc.name, err)
			}
		} else if err != nil {
			t.Errorf("%s: cancel: %v", tc.name, err)
		} else if st := jobstest.ValidStatusDoc(t, doc); st["status"] != "cancelled" {
			t.Errorf("%s: status %v", tc.name, st)
		}
	}
}
