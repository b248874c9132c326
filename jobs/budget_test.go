package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// setBudget gives org a daily budget of tokens.
func setBudget(t *testing.T, m *usage.Meter, org int64, tokens int64) {
	t.Helper()
	if err := m.SetBudget(context.Background(), org, usage.Budget{Tokens: tokens, Period: usage.Day}); err != nil {
		t.Fatal(err)
	}
}

// asBudgetRefusal fails the test unless err is admission's budget refusal, and returns it.
func asBudgetRefusal(t *testing.T, what string, err error) *admit.BudgetExhaustedError {
	t.Helper()
	var be *admit.BudgetExhaustedError
	if !errors.As(err, &be) || !errors.Is(err, admit.ErrBudgetExhausted) {
		t.Fatalf("%s: %v, want the budget's refusal", what, err)
	}
	return be
}

// TestBudgetReservedAtSubmit: a submit reserves its estimate at once, so the submit after the
// one that reached the budget is refused before anything has run, with the seconds until the
// period resets; another org is not held, and clearing the budget admits again.
func TestBudgetReservedAtSubmit(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
	ctx := context.Background()
	setBudget(t, m, e.O, 10)
	first := e.Submit("the first is admitted")
	reserved := e.Job(first.JobID).BudgetTokens
	if reserved <= 10 {
		t.Fatalf("the first job reserves %d tokens, want its text plus the default output estimate", reserved)
	}
	_, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "the second finds the first's reservation"})
	be := asBudgetRefusal(t, "the second submit", err)
	if be.Used != 0 || be.Reserved != int64(reserved) || be.Budget != 10 {
		t.Errorf("refusal %+v, want nothing used, the first job's %d reserved", be, reserved)
	}
	_, end := usage.Day.Bounds(time.Now())
	if want := int(time.Until(end).Seconds()); be.RetryAfter() < want-5 || be.RetryAfter() > want+5 {
		t.Errorf("RetryAfter %d, want about %d", be.RetryAfter(), want)
	}
	other, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "member")
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: other, UserID: otherUser},
		Prompt: "another org is not held"}); err != nil {
		t.Errorf("another org: %v", err)
	}
	// A scheduled submit reserves as well: later is not a way around the budget.
	at := time.Now().Add(time.Hour)
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "later, then", ScheduledFor: &at}); err == nil {
		t.Error("a scheduled submit over the budget was accepted")
	}
	setBudget(t, m, e.O, 0)
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "cleared"}); err != nil {
		t.Errorf("after the budget was cleared: %v", err)
	}
}

// TestBudgetHoldsAcrossProcesses: 40 submits at once, from two services on their own
// connection pools (two processes), against a budget of a little over two jobs' estimates:
// exactly three are admitted (each saw the reservations before it below the budget), and what
// they spend stays within the budget plus one job.
func TestBudgetHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
	ctx := context.Background()
	second, err := db.Open(ctx, db.OpenConfig{URL: e.D.URL, WaitFor: 5 * time.Second, MaxOpenConns: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	other := jobstest.NewService(t, &dbtest.DB{Bun: second, Pool: e.D.Pool, URL: e.D.URL}, jobstest.InstantSim())

	probe := e.Submit("prompt 00")
	estimate := int64(e.Job(probe.JobID).BudgetTokens)
	if _, err := e.S.Cancel(ctx, e.V, probe.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	budget := 2*estimate + 1
	setBudget(t, m, e.O, budget)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted []uuid.UUID
		refused  int
		failures []error
	)
	for i := range 40 {
		svc := e.S
		if i%2 == 1 {
			svc = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := svc.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: fmt.Sprintf("prompt %02d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted = append(admitted, out.JobID)
			case errors.Is(err, admit.ErrBudgetExhausted):
				refused++
			default:
				failures = append(failures, err)
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("submits failed: %v", failures)
	}
	if len(admitted) != 3 || refused != 37 {
		t.Fatalf("%d admitted and %d refused, want 3 and 37", len(admitted), refused)
	}
	var reservedSum int64
	for _, id := range admitted {
		reservedSum += int64(e.Job(id).BudgetTokens)
	}
	if reservedSum > budget+estimate {
		t.Errorf("the admitted jobs reserve %d tokens, more than the budget %d plus one job", reservedSum, budget)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	for _, id := range admitted {
		e.WaitState(id, jobs.StateSucceeded, 30*time.Second)
	}
	st, err := m.Status(ctx, e.O)
	if err != nil || st.Used > budget+estimate {
		t.Errorf("spent %+v (%v), more than the budget %d plus one job of %d", st, err, budget, estimate)
	}
}

// TestBudgetCheckedAtStart: eight jobs scheduled for a moment later are accepted before their
// org has a budget; once it has one, a job starts only while the usage plus the reservations
// of the org's running jobs is below it, whichever of two processes' workers starts it. Three
// of the eight start (the third saw two jobs' reservations, below the budget), the other five
// wait saying why and never start, until the budget is cleared and they all run.
func TestBudgetCheckedAtStart(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
	ctx := context.Background()
	second, err := db.Open(ctx, db.OpenConfig{URL: e.D.URL, WaitFor: 5 * time.Second, MaxOpenConns: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	other := jobstest.NewService(t, &dbtest.DB{Bun: second, Pool: e.D.Pool, URL: e.D.URL}, jobstest.InstantSim())
	at := time.Now().Add(time.Second)
	var ids []uuid.UUID
	for i := range 8 {
		sub := e.Submit(fmt.Sprintf("waits %d #sim:hang", i), func(r *jobs.SubmitRequest) { r.ScheduledFor = &at })
		ids = append(ids, sub.JobID)
	}
	estimate := int64(e.Job(ids[0]).BudgetTokens)
	setBudget(t, m, e.O, 2*estimate+1)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	jobstest.StartRuntime(t, e.D.Pool, other, 4)
	count := func(state, waiting string) int {
		return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = ? AND coalesce(waiting_for, '') = ?", e.O, state, waiting)
	}
	jobstest.WaitFor(t, 60*time.Second, "five jobs to wait for the budget", func() bool {
		return count("queued", jobs.WaitingBudget) == 5
	})
	if running := count("running", ""); running != 3 {
		t.Errorf("%d jobs running beside the five waiting, want 3", running)
	}
	// Every start's reservation is in the running counter once, and no start hold is left over.
	if _, running, _, want := budgetCounters(t, e, e.O); running != want {
		t.Errorf("the running counter holds %d, the running jobs %d", running, want)
	}
	if left := e.Count("SELECT count(*) FROM sa_budget_start_hold WHERE org_id = ?", e.O); left != 0 {
		t.Errorf("%d start holds left over", left)
	}
	setBudget(t, m, e.O, 0)
	jobstest.WaitFor(t, 60*time.Second, "all eight to start once the budget is cleared", func() bool {
		return count("running", "") == 8
	})
	for _, id := range ids {
		if _, err := e.S.Cancel(ctx, e.V, id, jobs.Actor{Name: "test"}); err != nil {
			t.Error(err)
		}
	}
}

// budgetCounters reads the reservations org's budget counters hold (less the releases not
// folded into them yet), and what its jobs hold.
func budgetCounters(t *testing.T, e *tenv, org int64) (reserved, running, wantReserved, wantRunning int64) {
	t.Helper()
	err := e.D.Bun.QueryRowContext(context.Background(), `SELECT
		b.reserved - coalesce((SELECT sum(reserved) FROM sa_budget_release WHERE org_id = b.org_id), 0),
		r.running - coalesce((SELECT sum(tokens) FROM sa_budget_running_release WHERE org_id = b.org_id), 0),
		coalesce((SELECT sum(budget_tokens) FROM sa_job WHERE org_id = b.org_id AND state IN ('queued', 'running')), 0),
		coalesce((SELECT sum(budget_tokens) FROM sa_job WHERE org_id = b.org_id AND state = 'running'), 0)
		FROM sa_org_budget AS b JOIN sa_budget_running AS r ON r.org_id = b.org_id WHERE b.org_id = ?`, org).
		Scan(&reserved, &running, &wantReserved, &wantRunning)
	if err != nil {
		t.Fatal(err)
	}
	return reserved, running, wantReserved, wantRunning
}

// TestBudgetSeededWhileJobsAreWritten: a budget set while submits of its org are being
// written starts from exactly the reservations of the jobs written before it, and counts
// every job written after it, none twice and none missed; cancelling and finishing give the
// reservations back, to nothing once every job has finished, and changing the budget on the
// way keeps the counters.
func TestBudgetSeededWhileJobsAreWritten(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      []uuid.UUID
		failures []error
	)
	half := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				out, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: fmt.Sprintf("writer %d prompt %02d", w, i)})
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					ids = append(ids, out.JobID)
				}
				if len(ids) == 20 {
					close(half)
				}
				mu.Unlock()
			}
		}()
	}
	<-half
	setBudget(t, m, e.O, 1_000_000_000)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("submits failed: %v", failures)
	}
	reserved, running, want, wantRunning := budgetCounters(t, e, e.O)
	if reserved != want || running != wantRunning || want == 0 {
		t.Fatalf("the budget row holds %d reserved and %d running, the jobs %d and %d", reserved, running, want, wantRunning)
	}
	for _, id := range ids[:5] {
		if _, err := e.S.Cancel(ctx, e.V, id, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if reserved, _, want, _ := budgetCounters(t, e, e.O); reserved != want {
		t.Fatalf("after cancelling five, the budget row holds %d reserved, the jobs %d", reserved, want)
	}
	// Changing the budget while the cancels' releases are still pending keeps one account.
	setBudget(t, m, e.O, 2_000_000_000)
	if reserved, running, want, wantRunning := budgetCounters(t, e, e.O); reserved != want || running != wantRunning {
		t.Fatalf("after changing the budget, its counters hold %d reserved and %d running, the jobs %d and %d",
			reserved, running, want, wantRunning)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	for _, id := range ids[5:] {
		e.WaitState(id, jobs.StateSucceeded, 60*time.Second)
	}
	if reserved, running, _, _ := budgetCounters(t, e, e.O); reserved != 0 || running != 0 {
		t.Errorf("with every job finished the budget row holds %d reserved and %d running, want none", reserved, running)
	}
}
