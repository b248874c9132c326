package admit

import (
	"context"
	"testing"

	"asterion/db/dbtest"
	"asterion/jobs/provider"
)

// TestMeanOutputReadsItsModelAlone: the estimate of a job that sets no max_tokens is the mean
// output of its model's last 100 attempts, read on the submit path. A model with few attempts
// beside thousands of another's must cost its own rows only: read in the order of every
// attempt's finish, it walked all of them back to the first.
func TestMeanOutputReadsItsModelAlone(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	var org int64
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES ('estimate') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		// The rare model's three attempts finished before any of the busy one's.
		`INSERT INTO sa_attempt (job_id, attempt, org_id, model, started_at, finished_at, input_tokens, output_tokens, cost_usd)
		SELECT gen_random_uuid(), 1, ?, 'rare', now() - interval '2 hours', now() - interval '1 hour' - i * interval '1 s', 1, 30 + 10 * i, 0
		FROM generate_series(1, 3) AS i`,
		`INSERT INTO sa_attempt (job_id, attempt, org_id, model, started_at, finished_at, input_tokens, output_tokens, cost_usd)
		SELECT gen_random_uuid(), 1, ?, 'busy', now() - interval '1 hour', now() - i * interval '1 ms', 1, 10, 0
		FROM generate_series(1, 5000) AS i`,
		"ANALYZE sa_attempt",
	} {
		if _, err := d.Bun.ExecContext(ctx, q, org); err != nil {
			t.Fatal(err)
		}
	}
	a, err := New(Config{DB: d.Bun, Models: []string{"busy", "rare"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model    string
		mean     int
		maxReads int64
	}{
		{"rare", 50, 3},
		{"busy", 10, 100},
		{"unused", defaultOutputEstimate, 0},
	} {
		t.Run(c.model, func(t *testing.T) {
			tx, err := d.Bun.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			before := dbtest.RowsRead(t, tx, "sa_attempt")
			var mean *float64
			if err := tx.Tx.QueryRowContext(ctx, meanOutputSQL, c.model).Scan(&mean); err != nil {
				t.Fatal(err)
			}
			if read := dbtest.RowsRead(t, tx, "sa_attempt") - before; read > c.maxReads {
				t.Errorf("the mean output of %s read %d attempt rows beside 5003; want at most its own %d", c.model, read, c.maxReads)
			}
			got, err := a.estimate(ctx, c.model, "four", 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := provider.EstimateTokens("four") + c.mean; got != want {
				t.Errorf("estimate of a job on %s without max_tokens %d, want %d (mean output %d)", c.model, got, want, c.mean)
			}
		})
	}
}
