package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/admit"
	"asterion/jobs/intake"
)

// jobTimes reads the created_at of each job: the start of the transaction that wrote it.
func jobTimes(t *testing.T, s *Service, ids []uuid.UUID) map[uuid.UUID]time.Time {
	t.Helper()
	var rows []db.Job
	if err := s.db.NewSelect().Model(&rows).Where("id IN (?)", bun.List(ids)).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]time.Time{}
	for _, j := range rows {
		out[j.ID] = j.CreatedAt
	}
	return out
}

// waitingSubmits is n validated submits of v, prompts "<label> <i>", about to join a group.
func waitingSubmits(t *testing.T, ctx context.Context, s *Service, v Viewer, label string, n int) []*pendingSubmit {
	t.Helper()
	var batch []*pendingSubmit
	for i := range n {
		r := SubmitRequest{Viewer: v, Prompt: fmt.Sprintf("%s %d", label, i)}
		if err := r.validate(s.door); err != nil {
			t.Fatal(err)
		}
		if err := s.door.Check(ctx, &r.adm); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, intake.NewWait[SubmitRequest, Submitted](ctx, r))
	}
	return batch
}

func distinct(times map[uuid.UUID]time.Time) int {
	seen := map[time.Time]bool{}
	for _, at := range times {
		seen[at] = true
	}
	return len(seen)
}

// TestConcurrentSubmitsShareTransactions: submits that arrive while every flusher is busy wait
// and then go in shared transactions of at most submitMax: 48 waiting submits take exactly two
// transactions (32 + 16), and each is complete: prompt, job on its own River vehicle,
// registry row at its first history entry, event.
func TestConcurrentSubmitsShareTransactions(t *testing.T) {
	t.Parallel()
	s, d, org, user := newInternalService(t, "group")
	ctx := context.Background()
	// Every flusher looks busy, so the submits queue up.
	s.submits.Hold()
	const n = 48
	subs := make([]Submitted, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs[i], errs[i] = s.Submit(ctx, SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: fmt.Sprintf("grouped %d", i)})
		}()
	}
	dbtest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d submits waiting", n), func() bool { return s.submits.Waiting() == n })
	// One flusher starts now: it takes them all, submitMax at a time.
	go s.submits.Release(ctx)
	wg.Wait()
	ids := make([]uuid.UUID, n)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		ids[i] = subs[i].JobID
	}
	times := jobTimes(t, s, ids)
	if len(times) != n || distinct(times) != 2 {
		t.Errorf("%d jobs written in %d transactions, want %d in 2", len(times), distinct(times), n)
	}
	for i, sub := range subs {
		var prompt db.Entity
		if err := d.Bun.NewSelect().Model(&prompt).Where("id = ?", sub.PromptID).Scan(ctx); err != nil {
			t.Fatalf("prompt of submit %d: %v", i, err)
		}
		if prompt.Body != fmt.Sprintf("grouped %d", i) {
			t.Errorf("submit %d wrote prompt %q", i, prompt.Body)
		}
	}
	for query, want := range map[string]int{
		"SELECT count(DISTINCT river_job_id) FROM sa_job WHERE state = 'queued'":                             n,
		"SELECT count(*) FROM river_job WHERE kind = 'prompt.execute'":                                       n,
		"SELECT count(*) FROM sa_operation WHERE status = 'pending' AND history_seq = 1":                     n,
		"SELECT count(*) FROM sa_operation_history WHERE seq = 1 AND status = 'pending'":                     n,
		"SELECT count(*) FROM sa_event WHERE payload->>'state' = 'queued'":                                   n,
		"SELECT count(*) FROM sa_job j JOIN sa_operation o ON o.id = j.operation_id AND o.org_id = j.org_id": n,
	} {
		var got int
		if err := d.Bun.QueryRowContext(ctx, query).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %d, want %d", query, got, want)
		}
	}
}

// TestGroupAnswersEachSubmitOnItsOwn: in one group, a submit naming a parent its user cannot
// see gets its validation error and writes nothing, while the others are written, a child of
// a visible parent in that parent's correlation.
func TestGroupAnswersEachSubmitOnItsOwn(t *testing.T) {
	t.Parallel()
	s, d, org, user := newInternalService(t, "answers")
	ctx := context.Background()
	other, err := s.Submit(ctx, SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: "a parent"})
	if err != nil {
		t.Fatal(err)
	}
	var stranger, strangerUser int64
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES ('stranger-org') RETURNING id").Scan(&stranger); err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO users (org_id, name, role) VALUES (?, 'stranger', 'member') RETURNING id",
		stranger).Scan(&strangerUser); err != nil {
		t.Fatal(err)
	}
	req := func(v Viewer, text string, parent *uuid.UUID) *pendingSubmit {
		r := SubmitRequest{Viewer: v, Prompt: text, ParentID: parent}
		if err := r.validate(s.door); err != nil {
			t.Fatal(err)
		}
		if err := s.door.Check(ctx, &r.adm); err != nil {
			t.Fatal(err)
		}
		return intake.NewWait[SubmitRequest, Submitted](ctx, r)
	}
	batch := []*pendingSubmit{
		req(Viewer{OrgID: org, UserID: user}, "child", &other.PromptID),
		req(Viewer{OrgID: stranger, UserID: strangerUser}, "nosy", &other.PromptID),
		req(Viewer{OrgID: stranger, UserID: strangerUser}, "alone", nil),
	}
	s.submits.Flush(ctx, batch)
	child, nosy, alone := <-batch[0].Done(), <-batch[1].Done(), <-batch[2].Done()
	var verr *ValidationError
	if !errors.As(nosy.Err, &verr) || verr.Fields["parent_id"] == "" {
		t.Errorf("submit naming another org's parent: %v, want a parent_id validation error", nosy.Err)
	}
	if child.Err != nil || alone.Err != nil {
		t.Fatalf("the others: %v, %v", child.Err, alone.Err)
	}
	var prompt db.Entity
	if err := d.Bun.NewSelect().Model(&prompt).Where("id = ?", child.Res.PromptID).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if prompt.ParentID == nil || *prompt.ParentID != other.PromptID || prompt.CorrelationID != other.PromptID {
		t.Errorf("child prompt: parent %v correlation %s, want both %s", prompt.ParentID, prompt.CorrelationID, other.PromptID)
	}
	if times := jobTimes(t, s, []uuid.UUID{child.Res.JobID, alone.Res.JobID}); len(times) != 2 || distinct(times) != 1 {
		t.Errorf("the two accepted submits: %v, want both written by one transaction", times)
	}
	var prompts int
	if err := d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_entity WHERE body = 'nosy'").Scan(&prompts); err != nil || prompts != 0 {
		t.Errorf("refused submit left %d prompts (err %v)", prompts, err)
	}
}

// TestFailedGroupRetriesEachSubmitAlone: when a group's transaction fails, nothing of it is
// written and each submit gets a transaction of its own, so the others do not share one
// submit's failure.
func TestFailedGroupRetriesEachSubmitAlone(t *testing.T) {
	t.Parallel()
	s, _, org, user := newInternalService(t, "fallback")
	ctx := context.Background()
	var groups []int
	s.groupFault = func(n int) error {
		groups = append(groups, n)
		if n > 1 {
			return errors.New("injected failure of a shared transaction")
		}
		return nil
	}
	batch := waitingSubmits(t, ctx, s, Viewer{OrgID: org, UserID: user}, "retried", 3)
	s.submits.Flush(ctx, batch)
	var ids []uuid.UUID
	for i, p := range batch {
		out := <-p.Done()
		if out.Err != nil {
			t.Fatalf("submit %d: %v", i, out.Err)
		}
		ids = append(ids, out.Res.JobID)
	}
	if len(groups) != 1 || groups[0] != 3 {
		t.Errorf("groups written: %v, want one of 3 (then each submit alone)", groups)
	}
	if times := jobTimes(t, s, ids); len(times) != 3 || distinct(times) != 3 {
		t.Errorf("jobs %v, want 3 written by 3 transactions", times)
	}
	var jobs int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sa_job").Scan(&jobs); err != nil || jobs != 3 {
		t.Errorf("%d jobs in all (err %v), want 3: the failed group wrote nothing", jobs, err)
	}
}

// TestPanickingGroupAnswersEverySubmit: a panic while a group is written (here from the fault
// hook) answers each of its submits with an error rather than leaving them waiting, and the
// service goes on accepting submits.
func TestPanickingGroupAnswersEverySubmit(t *testing.T) {
	t.Parallel()
	s, _, org, user := newInternalService(t, "panic")
	ctx := context.Background()
	s.groupFault = func(int) error { panic("injected panic in a group write") }
	batch := waitingSubmits(t, ctx, s, Viewer{OrgID: org, UserID: user}, "panicked", 2)
	s.submits.Flush(ctx, batch)
	for i, p := range batch {
		select {
		case out := <-p.Done():
			if out.Err == nil {
				t.Errorf("submit %d answered without an error after the panic", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("submit %d never answered", i)
		}
	}
	s.groupFault = nil
	if _, err := s.Submit(ctx, SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: "after the panic"}); err != nil {
		t.Fatalf("submit after the panic: %v", err)
	}
}

// budgetAccount reads what org's budget counter holds (less the releases not folded into it
// yet), what its unfinished jobs reserve, and its holds not taken.
func budgetAccount(t *testing.T, d *dbtest.DB, org int64) (counter, jobs, holds int64) {
	t.Helper()
	err := d.Bun.QueryRowContext(context.Background(), `SELECT
		b.reserved - coalesce((SELECT sum(reserved) FROM sa_budget_release WHERE org_id = b.org_id), 0),
		coalesce((SELECT sum(budget_tokens) FROM sa_job WHERE org_id = b.org_id AND state IN ('queued', 'running')), 0),
		coalesce((SELECT sum(tokens) FROM sa_budget_hold WHERE org_id = b.org_id), 0)
		FROM sa_org_budget AS b WHERE b.org_id = ?`, org).Scan(&counter, &jobs, &holds)
	if err != nil {
		t.Fatal(err)
	}
	return counter, jobs, holds
}

// TestGroupHoldsItsBudgetAheadOfItsTransaction: a group's reservations are held against its
// org's budget before its transaction writes the jobs, and every way that transaction ends
// leaves one account, the budget counter equal to what the org's jobs reserve:
//   - committed: the transaction took the hold, and its jobs added nothing of their own;
//   - failed: the hold was given back, and each submit admitted again alone;
//   - its hold gone before it was taken (given back, or swept as a dead process's): the
//     transaction failed rather than write jobs no reservation covers, and each submit was
//     admitted again alone;
//   - never taken (its process died): the hold is swept by the org's next hold once older
//     than any submit lives.
//
// Another submit while a hold is out sees the hold's reservation: the budget's room is taken.
func TestGroupHoldsItsBudgetAheadOfItsTransaction(t *testing.T) {
	t.Parallel()
	s, d, org, user := newInternalService(t, "held")
	ctx := context.Background()
	v := Viewer{OrgID: org, UserID: user}
	if _, err := d.Bun.ExecContext(ctx, "INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, ?, 'day')", org, 1_000_000); err != nil {
		t.Fatal(err)
	}
	settled := func(label string, wantJobs int) {
		t.Helper()
		counter, jobs, holds := budgetAccount(t, d, org)
		var n int
		if err := d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job WHERE org_id = ?", org).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if counter != jobs || holds != 0 || n != wantJobs {
			t.Errorf("%s: the counter holds %d, the jobs reserve %d, holds %d, %d jobs; want the counter equal to the jobs, no hold, %d jobs",
				label, counter, jobs, holds, n, wantJobs)
		}
	}
	flush := func(label string, n int) []error {
		t.Helper()
		batch := waitingSubmits(t, ctx, s, v, label, n)
		s.submits.Flush(ctx, batch)
		var errs []error
		for _, p := range batch {
			errs = append(errs, (<-p.Done()).Err)
		}
		return errs
	}
	allAccepted := func(label string, errs []error) {
		t.Helper()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: submit %d: %v", label, i, err)
			}
		}
	}

	// Committed.
	var during int64
	s.groupFault = func(n int) error {
		if n == 3 {
			// The hold is out, not taken yet: it already stands in the counter.
			counter, jobs, holds := budgetAccount(t, d, org)
			during = counter - jobs - holds
			if holds < 3 {
				t.Errorf("the hold of 3 submits holds %d tokens", holds)
			}
		}
		return nil
	}
	allAccepted("committed", flush("committed", 3))
	if during != 0 {
		t.Errorf("while the hold was out the counter was %d off the jobs and the hold", during)
	}
	settled("committed", 3)

	// Failed.
	var groups []int
	s.groupFault = func(n int) error {
		groups = append(groups, n)
		if n > 1 {
			return errors.New("injected failure of a shared transaction")
		}
		return nil
	}
	allAccepted("failed", flush("failed", 3))
	if len(groups) != 1 || groups[0] != 3 {
		t.Errorf("groups written %v, want the failed group of 3 (then each submit alone, outside any group)", groups)
	}
	settled("failed", 6)

	// Its hold gone before it was taken.
	s.groupFault = func(n int) error {
		if n == 3 {
			if _, err := d.Bun.ExecContext(ctx, "SELECT asterion_budget_giveback(id) FROM sa_budget_hold WHERE org_id = ?", org); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	allAccepted("gone", flush("gone", 3))
	settled("gone", 9)
	s.groupFault = nil

	// Never taken: a hold whose process died, older than any submit lives.
	var dead *admit.Held
	r := waitingSubmits(t, ctx, s, v, "dead", 1)[0].Req.adm
	e := int64(r.Estimate())
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		dead, err = s.door.Hold(ctx, tx, []*admit.Request{&r})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, holds := budgetAccount(t, d, org); holds != e {
		t.Fatalf("the dead process's hold holds %d, want %d", holds, e)
	}
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_budget_hold SET created_at = created_at - interval '11 minutes' WHERE id = ?", dead.ID); err != nil {
		t.Fatal(err)
	}
	allAccepted("after the dead hold", flush("after", 1))
	settled("after the dead hold", 10)
}
