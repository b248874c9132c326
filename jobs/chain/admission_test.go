package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/chain"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// withUsage records every attempt's usage, so that a budget sees what a step spent.
func withUsage(t *testing.T) func(*jobs.Config) {
	return func(c *jobs.Config) {
		m, err := usage.New(usage.Config{DB: c.DB, StatusTTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		c.Usage = m
	}
}

// TestChainStepsPassAdmission: a chain and each step it queues pass the one admission. With a
// budget of one token, the first step of a chain is admitted (nothing was reserved before it)
// and a second chain is refused while it waits; once the first step has run and its usage is
// recorded, the chain's next step is refused, and the chain fails saying so instead of
// queueing it.
func TestChainStepsPassAdmission(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), withUsage(t))
	ctx := context.Background()
	if _, err := e.D.Bun.ExecContext(ctx, "INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, 1, 'day')", e.O); err != nil {
		t.Fatal(err)
	}
	acc := e.submitChain(chain.Request{Steps: steps("one", "two")})
	_, err := e.c.Submit(ctx, chain.Request{Viewer: e.V, Steps: steps("refused at once")})
	if !errors.Is(err, admit.ErrBudgetExhausted) {
		t.Fatalf("a chain over the budget: %v", err)
	}
	if n := e.Count("SELECT count(*) FROM sa_chain"); n != 1 {
		t.Errorf("%d chains written, want only the admitted one", n)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	d := e.waitChain(acc.Chain.ID, 30*time.Second, chain.Completed, chain.Failed)
	if d.Chain.State != chain.Failed {
		t.Fatalf("chain %s, want failed at its second step", d.Chain.State)
	}
	var diag chain.Diagnostic
	if err := json.Unmarshal(d.Chain.Diagnostic, &diag); err != nil {
		t.Fatal(err)
	}
	if diag.Step != 2 || diag.ErrorKind != "budget-exhausted" || diag.Status != "refused" {
		t.Errorf("diagnostic %+v, want step 2 refused by the budget", diag)
	}
	if d.Steps[1].PromptID != nil {
		t.Errorf("the refused step wrote a prompt")
	}
	if n := e.Count("SELECT count(*) FROM sa_job WHERE org_id = ?", e.O); n != 1 {
		t.Errorf("%d jobs, want only the first step's", n)
	}
	jobstest.ValidStatusDoc(t, d.Status)
}
