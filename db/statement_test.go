package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
)

func ptr[T any](v T) *T { return &v }

var (
	explicit = time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.FixedZone("x", 5*3600+1800))
	// late has nanoseconds past the microsecond and a zone west of UTC.
	late = time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("y", -(7*3600+15*60)))
)

// inserter is an entity with a named INSERT text.
type inserter interface{ InsertStatement() db.Statement }

// entityRows are rows of one table, each made fresh per call: bun scans RETURNING values into
// the model it inserts, so two inserts must not share one. The first leaves every field it can
// zero (bun's DEFAULT rules), the second sets every column.
type entityRows struct {
	table string
	rows  []func() inserter
}

func entityCases() []entityRows {
	id := func(n byte) uuid.UUID { return uuid.UUID{15: n, 0: 0xa0} }
	refs := json.RawMessage(`[{"q": "what? $1 it's ?", "u": "ü 世界", "b": "a\\b"}]`)
	return []entityRows{
		{"sa_entity", []func() inserter{
			func() inserter { return &db.Entity{ID: id(1)} },
			func() inserter {
				return &db.Entity{ID: id(2), Kind: "response", Body: tricky, CorrelationID: id(3), ParentID: ptr(id(4)),
					CausationID: ptr(id(5)), SourceRefs: refs, TruthClass: "generated", StateClass: "settled", OrgID: -9007199254740993,
					CreatedBy: 7, CreatedAt: explicit, UpdatedAt: late}
			},
		}},
		{"sa_job", []func() inserter{
			func() inserter { return &db.Job{ID: id(1)} },
			func() inserter {
				return &db.Job{ID: id(2), PromptID: id(3), State: "running", Priority: 32767, Attempt: 2, MaxAttempts: 3,
					ExecutionOptions: json.RawMessage(`{"model": "m?"}`), WorkerClaim: ptr("w ? $1"), ClaimedAt: ptr(explicit),
					StartedAt: ptr(late), RunningHeartbeatAt: ptr(explicit.Add(time.Microsecond)), FinishedAt: ptr(explicit),
					ResponseID: ptr(id(4)), ErrorKind: ptr("kind"), ErrorMessage: ptr(tricky), Supersedes: ptr(id(5)), OrgID: 1,
					CreatedBy: 2, CreatedAt: explicit, UpdatedAt: late, RiverJobID: ptr(int64(99)), ScheduledAt: late,
					OperationID: ptr(id(6)), CancelOutcome: ptr("aborted"), WaitingFor: ptr("org_share"), ScheduledFor: ptr(late)}
			},
		}},
		{"sa_edge", []func() inserter{
			func() inserter { return &db.Edge{} },
			func() inserter {
				return &db.Edge{Kind: "flows-to", FromID: id(1), ToID: id(2), OrgID: 3, CreatedAt: late}
			},
		}},
		{"sa_ledger", []func() inserter{
			func() inserter { return &db.LedgerEntry{} },
			func() inserter {
				return &db.LedgerEntry{JobID: id(1), PromptID: id(2), ResponseID: id(3), OrgID: 4, Provider: "p", Model: tricky,
					RequestID: "r?", PromptTokens: 5, CompletionTokens: 6, DurationMS: 7, CreatedAt: explicit}
			},
		}},
		{"sa_audit", []func() inserter{
			func() inserter { return &db.AuditEntry{} },
			func() inserter {
				return &db.AuditEntry{OrgID: 1, ActorID: ptr(int64(2)), Actor: "worker:?", Action: "job.failed", SubjectType: "job",
					SubjectID: tricky, Detail: json.RawMessage(`{"n": [1, 2.5, null]}`), CreatedAt: late}
			},
		}},
		{"sa_event", []func() inserter{
			func() inserter { return &db.Event{} },
			func() inserter {
				return &db.Event{Seq: ptr(int64(3)), Topic: "job", OrgID: 1, UserID: 2, PromptID: ptr(id(1)), JobID: ptr(id(2)),
					OperationID: ptr(id(3)), Payload: json.RawMessage(`{"s": "it's ?"}`), CreatedAt: explicit}
			},
		}},
		{"sa_operation", []func() inserter{
			func() inserter { return &db.Operation{ID: id(1)} },
			func() inserter { return fullOperation(id(2)) },
		}},
		{"sa_operation_history", []func() inserter{
			func() inserter { return &db.OperationHistory{} },
			func() inserter {
				return &db.OperationHistory{OperationID: id(1), Seq: 2, Status: "running", At: late,
					DocDigest: strings.Repeat("a", 64), PrevDigest: strings.Repeat("b", 64), EntryDigest: strings.Repeat("c", 64)}
			},
		}},
	}
}

// fullOperation is a registry row with every column set.
func fullOperation(id uuid.UUID) *db.Operation {
	return &db.Operation{ID: id, Kind: "prompt.execute", Owner: "prompt-runtime", Status: "running", OrgID: 1, CreatedBy: 2,
		Subject: json.RawMessage(`{"prompt_id": "x?"}`), CorrelationID: uuid.UUID{1: 1}, AcceptedAt: explicit, ExpiresAt: late,
		RetryAfterSeconds: 2, CancelUnavailableReason: ptr("no ? cancel"), ContinuationDigest: ptr("c"), DiagnosticsDigest: ptr("d"),
		Result: json.RawMessage(`{"text": "it's"}`), LastErrorKind: ptr("k"), LastErrorMessage: ptr(tricky),
		SuccessorID: ptr(uuid.UUID{2: 2}), NextPollAt: late, PollCount: 3, TerminalAt: ptr(explicit), UpdatedAt: explicit,
		HistorySeq: 4, HistoryDigest: ptr("h"), HistoryAt: ptr(late)}
}

// tableRows reads every row of table but its id, as text, in a stable order.
func tableRows(ctx context.Context, t *testing.T, idb bun.IDB, table string) string {
	t.Helper()
	var out string
	q := fmt.Sprintf("SELECT coalesce(string_agg(r, E'\\n' ORDER BY r), '') FROM (SELECT (to_jsonb(t) - 'id')::text AS r FROM %s AS t) AS s", table)
	if err := idb.QueryRowContext(ctx, q).Scan(&out); err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	return out
}

// replicaTx runs fn in a transaction that skips foreign keys and triggers (the rows reference
// nothing) and rolls it back.
func replicaTx(ctx context.Context, t *testing.T, d *bun.DB, fn func(ctx context.Context, tx bun.Tx) error) {
	t.Helper()
	rolledBackOn(ctx, t, d, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

func rolledBackOn(ctx context.Context, t *testing.T, d *bun.DB, fn func(ctx context.Context, tx bun.Tx) error) {
	t.Helper()
	err := d.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return errRollback
	})
	if err != nil && err != errRollback {
		t.Fatal(err)
	}
}

// batchForms are the two ways a batch travels: as one statement with parameters, and inlined
// among text statements.
var batchForms = []struct {
	name  string
	extra func(b *db.Batch)
}{
	{"with parameters", func(*db.Batch) {}},
	{"inlined among text statements", func(b *db.Batch) { b.AddSQL("SELECT 1") }},
}

// TestEntityInsertsWriteWhatBunWrites compares, table by table, the rows bun's own INSERTs
// write with the rows the entity's named INSERT writes for the same values, in the same
// transaction (so now() agrees), the rows of a table joined into one multi-row INSERT.
func TestEntityInsertsWriteWhatBunWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtestNew(t)
	for _, form := range batchForms {
		for _, c := range entityCases() {
			t.Run(form.name+"/"+c.table, func(t *testing.T) {
				replicaTx(ctx, t, d, func(ctx context.Context, tx bun.Tx) error {
					for _, row := range c.rows {
						if _, err := tx.NewInsert().Model(row()).Exec(ctx); err != nil {
							return fmt.Errorf("bun insert: %w", err)
						}
					}
					want := tableRows(ctx, t, tx, c.table)
					if _, err := tx.ExecContext(ctx, "DELETE FROM "+c.table); err != nil {
						return err
					}
					b := db.NewBatch(tx)
					for _, row := range c.rows {
						b.Insert(row().InsertStatement())
					}
					if b.Len() != 1 {
						t.Errorf("Len %d, want the rows joined into one INSERT", b.Len())
					}
					form.extra(b)
					if err := b.Exec(ctx, tx); err != nil {
						return fmt.Errorf("batch exec: %w", err)
					}
					if got := tableRows(ctx, t, tx, c.table); got != want {
						t.Errorf("the batch wrote\n%s\nbun wrote\n%s", got, want)
					}
					return nil
				})
			})
		}
	}
}

// TestOperationUpdateWritesWhatBunWrites updates a registry row with bun's Model(m).WherePK()
// and, from the same row, with the named UPDATE, and compares what each wrote.
func TestOperationUpdateWritesWhatBunWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtestNew(t)
	id := uuid.UUID{0: 0xb0, 15: 1}
	cases := map[string]func() *db.Operation{
		"zero values and defaults": func() *db.Operation { return &db.Operation{ID: id} },
		"every column set":         func() *db.Operation { o := fullOperation(id); o.Status = "completed"; return o },
	}
	for _, form := range batchForms {
		for name, make := range cases {
			t.Run(form.name+"/"+name, func(t *testing.T) {
				replicaTx(ctx, t, d, func(ctx context.Context, tx bun.Tx) error {
					seed := func() error {
						if _, err := tx.ExecContext(ctx, "DELETE FROM sa_operation"); err != nil {
							return err
						}
						seeded := fullOperation(id)
						seeded.Kind, seeded.Result = "seed", json.RawMessage(`{"seed": 1}`)
						_, err := tx.NewInsert().Model(seeded).Exec(ctx)
						return err
					}
					if err := seed(); err != nil {
						return err
					}
					if _, err := tx.NewUpdate().Model(make()).WherePK().Exec(ctx); err != nil {
						return fmt.Errorf("bun update: %w", err)
					}
					want := tableRows(ctx, t, tx, "sa_operation")
					if err := seed(); err != nil {
						return err
					}
					b := db.NewBatch(tx)
					b.Update(make().UpdateStatement())
					form.extra(b)
					if err := b.Exec(ctx, tx); err != nil {
						return fmt.Errorf("batch exec: %w", err)
					}
					if got := tableRows(ctx, t, tx, "sa_operation"); got != want {
						t.Errorf("the batch wrote\n%s\nbun wrote\n%s", got, want)
					}
					return nil
				})
			})
		}
	}
}

// TestEntityStatementsHaveAnArgumentPerPlaceholder checks every named text against the
// arguments its entity gives.
func TestEntityStatementsHaveAnArgumentPerPlaceholder(t *testing.T) {
	t.Parallel()
	var stmts []db.Statement
	for _, c := range entityCases() {
		for _, row := range c.rows {
			s := row().InsertStatement()
			if s.Table != c.table || !strings.HasPrefix(s.SQL, "INSERT INTO "+c.table+" (") {
				t.Errorf("insert of %T names table %q: %s", row(), s.Table, s.SQL)
			}
			stmts = append(stmts, s)
		}
	}
	stmts = append(stmts, fullOperation(uuid.New()).UpdateStatement())
	for _, s := range stmts {
		if n := strings.Count(s.SQL, "?"); n != len(s.Args) {
			t.Errorf("%d placeholders, %d arguments: %s", n, len(s.Args), s.SQL)
		}
	}
}

// TestBatchInsertKeepsMicrosecondsOfExplicitTimes reads back the times a named INSERT wrote.
func TestBatchInsertKeepsMicrosecondsOfExplicitTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtestNew(t)
	job := &db.Job{ID: uuid.New(), CreatedAt: explicit, ScheduledAt: explicit, ScheduledFor: ptr(explicit.Add(time.Microsecond))}
	replicaTx(ctx, t, d, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.Insert(job.InsertStatement())
		if err := b.Exec(ctx, tx); err != nil {
			return err
		}
		var createdAt, at, scheduledFor time.Time
		if err := tx.QueryRowContext(ctx, "SELECT created_at, scheduled_at, scheduled_for FROM sa_job WHERE id = ?", job.ID).
			Scan(&createdAt, &at, &scheduledFor); err != nil {
			return err
		}
		if !createdAt.Equal(explicit) || !at.Equal(explicit) || !scheduledFor.Equal(explicit.Add(time.Microsecond)) {
			t.Errorf("times read back %v, %v, %v; want %v and %v", createdAt, at, scheduledFor, explicit, explicit.Add(time.Microsecond))
		}
		return nil
	})
}

// dbtestNew is a fresh migrated database without check constraints, so that a row of zero
// values, which the app never writes, still shows what bun writes for it.
func dbtestNew(t *testing.T) *bun.DB {
	t.Helper()
	d := dbtest.New(t).Bun
	_, err := d.ExecContext(context.Background(), `DO $$DECLARE c record; BEGIN
		FOR c IN SELECT conrelid::regclass AS tbl, conname FROM pg_constraint WHERE contype = 'c' AND conrelid::regclass::text LIKE 'sa_%' LOOP
			EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tbl, c.conname);
		END LOOP; END$$`)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
