package admit_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/admit"
)

// TestTakeWithItsJobs: the transaction that writes a hold's jobs takes the hold before their
// budget trigger runs, whether the take travels in the jobs' own statement or, when their
// writes cannot go as one statement, ahead of them; either way the org's reservations count
// the jobs' tokens once (the hold's), never twice. A hold given back before its take fails the
// transaction, which then writes no job.
func TestTakeWithItsJobs(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	a, err := admit.New(admit.Config{DB: d.Bun, Models: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		apart     bool // the writes carry a setting, so they cannot go as one statement
		giveFirst bool // the hold is given back before it is taken
	}{
		{name: "in the jobs' statement"},
		{name: "ahead of writes that go apart", apart: true},
		{name: "gone", giveFirst: true},
		{name: "gone, writes apart", apart: true, giveFirst: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			org := newOrg(t, d, "take "+c.name)
			setDayBudget(t, d, org, 1000)
			r := &admit.Request{OrgID: org, UserID: 1, Text: "four", MaxTokens: 9}
			if err := a.Check(ctx, r); err != nil {
				t.Fatal(err)
			}
			e := int64(r.Estimate())
			prompt, job := uuid.New(), uuid.New()
			err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				h, err := a.Hold(ctx, tx, []*admit.Request{r})
				if err != nil {
					return err
				}
				if h.ID == uuid.Nil || h.Grants[0].Err != nil {
					t.Fatalf("hold %+v, want its one request granted", h)
				}
				if c.giveFirst {
					if err := a.GiveBack(ctx, h.ID); err != nil {
						return err
					}
				}
				w := db.NewWrites(tx)
				if c.apart {
					w.SetLocal("application_name", "take test")
				}
				w.Insert(db.Statement{Table: "sa_entity", SQL: `INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by)
					VALUES (?, 'prompt', 'p', ?, 'claim', 'open', ?, 1)`, Args: []any{prompt.String(), prompt.String(), org}})
				w.Insert(db.Statement{Table: "sa_job", SQL: `INSERT INTO sa_job (id, prompt_id, execution_options, org_id, created_by, budget_tokens)
					VALUES (?, ?, '{}', ?, 1, ?)`, Args: []any{job.String(), prompt.String(), org, e}})
				if got := w.OneStatement(); got == c.apart {
					t.Errorf("OneStatement %v with apart %v", got, c.apart)
				}
				return a.Take(ctx, tx, w, h)
			})
			var jobs int
			if err := d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job WHERE org_id = ?", org).Scan(&jobs); err != nil {
				t.Fatal(err)
			}
			counter, held := budgetStanding(t, d, org)
			if c.giveFirst {
				if err == nil || jobs != 0 || counter != 0 || held != 0 {
					t.Errorf("take of a hold given back: err %v, %d jobs, counter %d, held %d; want an error, no job, nothing reserved", err, jobs, counter, held)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if jobs != 1 || counter != e || held != 0 {
				t.Errorf("%d jobs, counter %d, held %d; want 1 job, its %d tokens counted once, no hold left", jobs, counter, held, e)
			}
		})
	}
}
