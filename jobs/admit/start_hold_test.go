package admit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"asterion/db/dbtest"
	"asterion/jobs/admit"
)

// queuedJob writes a queued job of org reserving tokens, with the prompt it needs.
func queuedJob(t *testing.T, d *dbtest.DB, org int64, tokens int) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	prompt, job := uuid.New(), uuid.New()
	if _, err := d.Bun.ExecContext(ctx, `INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by)
		VALUES (?, 'prompt', 'p', ?, 'claim', 'open', ?, 1)`, prompt, prompt, org); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, `INSERT INTO sa_job (id, prompt_id, execution_options, org_id, created_by, budget_tokens)
		VALUES (?, ?, '{}', ?, 1, ?)`, job, prompt, org, tokens); err != nil {
		t.Fatal(err)
	}
	return job
}

// newOrg creates an org named name.
func newOrg(t *testing.T, d *dbtest.DB, name string) int64 {
	t.Helper()
	var org int64
	if err := d.Bun.QueryRowContext(context.Background(), "INSERT INTO orgs (name) VALUES (?) RETURNING id", name).Scan(&org); err != nil {
		t.Fatal(err)
	}
	return org
}

// setDayBudget gives org a daily budget of tokens.
func setDayBudget(t *testing.T, d *dbtest.DB, org, tokens int64) {
	t.Helper()
	if _, err := d.Bun.ExecContext(context.Background(), "INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, ?, 'day')", org, tokens); err != nil {
		t.Fatal(err)
	}
}

// budgetStandingSQL reads an org's reservation counter, less the releases not yet folded into
// it, and the tokens of its submit holds not yet taken; runningStandingSQL the same of its
// running counter and start holds.
const (
	budgetStandingSQL = `SELECT b.reserved - coalesce((SELECT sum(reserved) FROM sa_budget_release WHERE org_id = b.org_id), 0),
		coalesce((SELECT sum(tokens) FROM sa_budget_hold WHERE org_id = b.org_id), 0) FROM sa_org_budget AS b WHERE b.org_id = ?`
	runningStandingSQL = `SELECT r.running - coalesce((SELECT sum(tokens) FROM sa_budget_running_release WHERE org_id = r.org_id), 0),
		coalesce((SELECT sum(tokens) FROM sa_budget_start_hold WHERE org_id = r.org_id), 0) FROM sa_budget_running AS r WHERE r.org_id = ?`
)

// budgetStanding reads org's reservation counter and untaken submit holds.
func budgetStanding(t *testing.T, d *dbtest.DB, org int64) (counter, held int64) {
	t.Helper()
	return standing(t, d, budgetStandingSQL, org)
}

// runningStanding reads org's running counter and untaken start holds.
func runningStanding(t *testing.T, d *dbtest.DB, org int64) (counter, held int64) {
	t.Helper()
	return standing(t, d, runningStandingSQL, org)
}

// standing reads the counter and held tokens query gives for org.
func standing(t *testing.T, d *dbtest.DB, query string, org int64) (counter, held int64) {
	t.Helper()
	if err := d.Bun.QueryRowContext(context.Background(), query, org).Scan(&counter, &held); err != nil {
		t.Fatal(err)
	}
	return counter, held
}

// TestHoldStart: a start hold decides as a locked start does (jobs of 10 tokens against a
// budget of 15: the first two are held, the second having seen 10 running, and the third waits
// until the period resets), holds their tokens in the running counter, and a second hold of the
// same job holds nothing more; setting the budget again keeps an untaken hold in the counter.
// The job's change to running takes the hold instead of adding its tokens again; a hold given
// back returns its tokens once; an org without a budget holds nothing.
func TestHoldStart(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	org, free := newOrg(t, d, "start-hold"), newOrg(t, d, "no-budget")
	first, second, third := queuedJob(t, d, org, 10), queuedJob(t, d, org, 10), queuedJob(t, d, org, 10)
	setDayBudget(t, d, org, 15)
	a, err := admit.New(admit.Config{DB: d.Bun, Models: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	standing := func() (counter, held int64) { t.Helper(); return runningStanding(t, d, org) }

	h, err := a.HoldStart(ctx, first, org)
	if err != nil || !h.Held() {
		t.Fatalf("the first start: held %v, %v; want held", h.Held(), err)
	}
	again, err := a.HoldStart(ctx, first, org)
	if err != nil || again.Held() {
		t.Errorf("a second hold of the same start: held %v, %v; want nothing held", again.Held(), err)
	}
	// The budget set again while the hold is untaken seeds the counter with the hold in it.
	if _, err := d.Bun.ExecContext(ctx, `INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, 15, 'day')
		ON CONFLICT (org_id) DO UPDATE SET tokens = EXCLUDED.tokens, period = EXCLUDED.period, reserved = EXCLUDED.reserved`, org); err != nil {
		t.Fatal(err)
	}
	if counter, held := standing(); counter != 10 || held != 10 {
		t.Fatalf("after the budget was set again the counter holds %d and the holds %d, want 10 and 10", counter, held)
	}
	h2, err := a.HoldStart(ctx, second, org)
	if err != nil || !h2.Held() {
		t.Fatalf("the second start: held %v, %v; want held", h2.Held(), err)
	}
	if counter, held := standing(); counter != 20 || held != 20 {
		t.Fatalf("after two holds the counter holds %d and the holds %d, want 20 and 20", counter, held)
	}
	var bw *admit.BudgetWaitError
	if _, err := a.HoldStart(ctx, third, org); !errors.As(err, &bw) || !errors.Is(err, admit.ErrBudgetWait) || bw.Resets.IsZero() {
		t.Errorf("the third job's start: %v, want it to wait for the budget until the period resets", err)
	}
	if counter, held := standing(); counter != 20 || held != 20 {
		t.Errorf("after the refused and repeated holds the counter holds %d and the holds %d, want 20 and 20", counter, held)
	}

	// The first job starts: its change to running takes the hold and adds nothing.
	if err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE sa_job SET state = 'running' WHERE id = ?", first)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if counter, held := standing(); counter != 20 || held != 10 {
		t.Errorf("with the first job running the counter holds %d and the holds %d, want 20 and the second's 10", counter, held)
	}
	if err := a.GiveBackStart(ctx, h); err != nil {
		t.Fatal(err)
	}
	if counter, _ := standing(); counter != 20 {
		t.Errorf("giving back a hold its start took left the counter at %d, want 20", counter)
	}

	// The running job finishes, which makes room for the third; its hold is given back twice and
	// returns its tokens once, and the second's goes back too.
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_job SET state = 'succeeded' WHERE id = ?", first); err != nil {
		t.Fatal(err)
	}
	h3, err := a.HoldStart(ctx, third, org)
	if err != nil || !h3.Held() {
		t.Fatalf("the third start once the first finished: held %v, %v; want held", h3.Held(), err)
	}
	for range 2 {
		if err := a.GiveBackStart(ctx, h3); err != nil {
			t.Fatal(err)
		}
		if counter, held := standing(); counter != 10 || held != 10 {
			t.Errorf("after giving the third's hold back the counter holds %d and the holds %d, want the second's 10", counter, held)
		}
	}
	if err := a.GiveBackStart(ctx, h2); err != nil {
		t.Fatal(err)
	}
	if counter, held := standing(); counter != 0 || held != 0 {
		t.Errorf("with every hold given back the counter holds %d and the holds %d, want none", counter, held)
	}

	if h, err := a.HoldStart(ctx, queuedJob(t, d, free, 10), free); err != nil || h.Held() {
		t.Errorf("a start of an org without a budget: held %v, %v; want nothing held", h.Held(), err)
	}
}

// TestHoldStartsTogether: starts asked for at once, by two processes, go to the database
// together and are judged one after the other as lone starts are. Forty jobs of 10 tokens of
// an org with a budget of 55 start at once, beside starts of an org without a budget: six are
// held (the sixth seeing 50 running), the rest wait for the budget, the counter holds the six
// holds' tokens, and the other org's starts hold nothing and wait for nothing. A start whose
// caller stopped waiting leaves no hold behind.
func TestHoldStartsTogether(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	org, free := newOrg(t, d, "starts-together"), newOrg(t, d, "starts-free")
	setDayBudget(t, d, org, 55)
	var procs [2]*admit.Admission
	for i := range procs {
		a, err := admit.New(admit.Config{DB: d.Bun, Models: []string{"m"}})
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = a
	}
	type start struct {
		job uuid.UUID
		org int64
	}
	var starts []start
	for range 40 {
		starts = append(starts, start{queuedJob(t, d, org, 10), org}, start{queuedJob(t, d, free, 10), free})
	}
	type answer struct {
		start
		held bool
		err  error
	}
	answers := make(chan answer, len(starts))
	release := make(chan struct{})
	for i, s := range starts {
		go func() {
			<-release
			h, err := procs[i%2].HoldStart(ctx, s.job, s.org)
			answers <- answer{s, h.Held(), err}
		}()
	}
	close(release)
	held, waiting := 0, 0
	for range starts {
		a := <-answers
		switch {
		case a.org == free && (a.held || a.err != nil):
			t.Errorf("a start of the org without a budget: held %v, %v; want nothing held", a.held, a.err)
		case a.org == free:
		case a.held && a.err == nil:
			held++
		case errors.Is(a.err, admit.ErrBudgetWait):
			waiting++
		default:
			t.Errorf("a start of the budgeted org: held %v, %v", a.held, a.err)
		}
	}
	if held != 6 || waiting != 34 {
		t.Errorf("of 40 starts at once against a budget of 55, %d were held and %d wait; want 6 and 34", held, waiting)
	}
	counter := func() (running, holds int64) { t.Helper(); return runningStanding(t, d, org) }
	if running, holds := counter(); running != 60 || holds != 60 {
		t.Errorf("the counter holds %d and the holds %d, want 60 and 60", running, holds)
	}

	// A caller that stops waiting: the hold made for it goes back.
	if _, err := d.Bun.ExecContext(ctx, "DELETE FROM sa_budget_start_hold WHERE org_id = ?", org); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_budget_running SET running = 0 WHERE org_id = ?", org); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	h, err := procs[0].HoldStart(gone, queuedJob(t, d, org, 10), org)
	switch {
	case err == nil && h.Held():
		// The answer came first; the caller gives it back itself.
		if err := procs[0].GiveBackStart(ctx, h); err != nil {
			t.Fatal(err)
		}
	case !errors.Is(err, context.Canceled):
		t.Fatalf("a start whose caller stopped waiting: held %v, %v", h.Held(), err)
	}
	// A start asked for afterwards is answered once the abandoned one's statement has run.
	after, err := procs[0].HoldStart(ctx, queuedJob(t, d, org, 10), org)
	if err != nil || !after.Held() {
		t.Fatalf("a start after the abandoned one: held %v, %v; want held", after.Held(), err)
	}
	if err := procs[0].GiveBackStart(ctx, after); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	for {
		running, holds := counter()
		if running == 0 && holds == 0 {
			break
		}
		if err := wait.Err(); err != nil {
			t.Fatalf("the abandoned start left the counter at %d and the holds at %d", running, holds)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A process of the version before holds one start at a time, by the same rule.
	var outcome string
	if err := d.Bun.QueryRowContext(ctx, "SELECT outcome FROM asterion_budget_start_hold(?, ?, now())",
		uuid.New(), queuedJob(t, d, org, 10)).Scan(&outcome); err != nil || outcome != "held" {
		t.Errorf("the one-start form: %q, %v; want held", outcome, err)
	}
	if running, holds := counter(); running != 10 || holds != 10 {
		t.Errorf("after the one-start form's hold the counter holds %d and the holds %d, want 10 and 10", running, holds)
	}
}

// TestHoldStartsReadOnlyTheirJobs: a statement of start holds reads the rows of its own jobs,
// however long the queue and whatever the planner's statistics say of it. The statistics are
// taken with no job queued, as after a drained queue, and then 3000 jobs of another org are
// queued: a read of sa_job that states state = 'queued' beside the ids may then walk the
// partial index of every queued job.
func TestHoldStartsReadOnlyTheirJobs(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	org, other := newOrg(t, d, "holds-read"), newOrg(t, d, "holds-backlog")
	setDayBudget(t, d, org, 1000)
	dbtest.SeedFinishedJobs(t, d.Bun, other, 1, 3000)
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_job SET state = 'queued', finished_at = NULL WHERE org_id = ?", other); err != nil {
		t.Fatal(err)
	}
	jobs := []uuid.UUID{queuedJob(t, d, org, 10), queuedJob(t, d, org, 10)}
	holds := []uuid.UUID{uuid.New(), uuid.New()}
	tx, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	before := dbtest.RowsRead(t, tx, "sa_job")
	held := 0
	rows, err := tx.QueryContext(ctx, "SELECT outcome FROM asterion_budget_start_holds(?::uuid[], ?::uuid[], now())",
		pgdialect.Array(holds), pgdialect.Array(jobs))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var outcome string
		if err := rows.Scan(&outcome); err != nil {
			t.Fatal(err)
		}
		if outcome == "held" {
			held++
		}
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if held != 2 {
		t.Errorf("%d of the two starts were held, want both", held)
	}
	if n := dbtest.RowsRead(t, tx, "sa_job") - before; n > 10 {
		t.Errorf("holding two starts read %d rows of sa_job beside a queue of 3000; want the two jobs' own", n)
	}
}
