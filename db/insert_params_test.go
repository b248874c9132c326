package db_test

import (
	"context"
	"database/sql"
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

const ipProbeDDL = `CREATE TABLE ip_probe (
	id          uuid PRIMARY KEY,
	ref         uuid NULL,
	body        text NOT NULL,
	doc         jsonb NOT NULL DEFAULT '{"dflt": true}'::jsonb,
	extra       jsonb NULL,
	tags        jsonb NULL,
	big         bigint NOT NULL,
	small       smallint NOT NULL,
	level       smallint NOT NULL DEFAULT 7,
	flag        boolean NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now(),
	at          timestamptz NOT NULL,
	seen_at     timestamptz NULL,
	note        text NULL
)`

// ipProbe covers the field kinds insertParams handles, with each of bun's DEFAULT rules:
// nil pointers (Ref, SeenAt, Note), nullzero (Doc, CreatedAt) and a tag default (Level).
type ipProbe struct {
	bun.BaseModel `bun:"table:ip_probe"`
	ID            uuid.UUID       `bun:"id,pk,type:uuid"`
	Ref           *uuid.UUID      `bun:"ref,type:uuid"`
	Body          string          `bun:"body"`
	Doc           json.RawMessage `bun:"doc,type:jsonb,nullzero"`
	Extra         json.RawMessage `bun:"extra,type:jsonb"`
	Tags          map[string]any  `bun:"tags,type:jsonb"`
	Big           int64           `bun:"big"`
	Small         int16           `bun:"small"`
	Level         int16           `bun:"level,default:7"`
	Flag          bool            `bun:"flag"`
	CreatedAt     time.Time       `bun:"created_at,nullzero,default:now()"`
	At            time.Time       `bun:"at"`
	SeenAt        *time.Time      `bun:"seen_at"`
	Note          *string         `bun:"note"`
}

// ipColumns reads every column but id as text, so two rows compare column by column.
var ipColumns = []string{"ref", "body", "doc", "extra", "tags", "big", "small", "level", "flag", "created_at", "at", "seen_at", "note"}

func readProbe(ctx context.Context, t *testing.T, idb bun.IDB, id uuid.UUID) map[string]sql.NullString {
	t.Helper()
	exprs := make([]string, len(ipColumns))
	for i, c := range ipColumns {
		exprs[i] = c + "::text"
	}
	vals := make([]sql.NullString, len(ipColumns))
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM ip_probe WHERE id = " + sqlLiteral(id.String())
	if err := idb.QueryRowContext(ctx, q).Scan(dest...); err != nil {
		t.Fatalf("read probe row %s: %v", id, err)
	}
	out := make(map[string]sql.NullString, len(ipColumns))
	for i, c := range ipColumns {
		out[c] = vals[i]
	}
	return out
}

func showNull(v sql.NullString) string {
	if !v.Valid {
		return "NULL"
	}
	return fmt.Sprintf("%q", v.String)
}

func ptr[T any](v T) *T { return &v }

type ipCase struct {
	name string
	// make returns a fresh model each call: bun scans RETURNING values into the model it
	// inserts, so the two inserts must not share one.
	make func(id uuid.UUID) *ipProbe
	// check, when set, asserts on the row the batch wrote.
	check func(t *testing.T, row map[string]sql.NullString)
}

var (
	tricky   = "what? it's ?1 and $1; -- héllo wörld 世界 🚀 and a \\ backslash, C:\\path\\n"
	explicit = time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.FixedZone("x", 5*3600+1800))
	refID    = uuid.MustParse("0d9d7e7e-5a4a-4c1b-9a57-7d4c2c8a1f00")
)

const nilJSONCase = "nil jsonb without nullzero"

func ipCases() []ipCase {
	return []ipCase{
		{
			// Extra is set: a nil json.RawMessage without a default has its own case below.
			name: "zero values and defaults",
			make: func(id uuid.UUID) *ipProbe { return &ipProbe{ID: id, Extra: json.RawMessage(`0`)} },
			check: func(t *testing.T, row map[string]sql.NullString) {
				if row["doc"].String != `{"dflt": true}` || row["level"].String != "7" || row["ref"].Valid ||
					row["note"].Valid || row["seen_at"].Valid || !row["created_at"].Valid {
					t.Errorf("defaults not applied: %v", row)
				}
				if !strings.HasPrefix(row["at"].String, "0001-01-01") {
					t.Errorf("zero time stored as %s, want the zero instant", showNull(row["at"]))
				}
			},
		},
		{
			name: "every column set",
			make: func(id uuid.UUID) *ipProbe {
				return &ipProbe{
					ID: id, Ref: ptr(refID), Body: tricky,
					Doc:   json.RawMessage(`{"q": "what? $1 it's ?", "u": "ü 世界", "b": "a\\b", "n": [1, 2.5, null]}`),
					Extra: json.RawMessage(`[true, "x"]`),
					Tags:  map[string]any{"k": "v?", "n": 3},
					Big:   -9007199254740993, Small: -32768, Level: 32767, Flag: true,
					CreatedAt: explicit.Add(-time.Hour), At: explicit, SeenAt: ptr(explicit.Add(time.Microsecond)),
					Note: ptr("note ? $2 '' \\"),
				}
			},
			check: func(t *testing.T, row map[string]sql.NullString) {
				if row["ref"].String != refID.String() || row["body"].String != tricky || row["big"].String != "-9007199254740993" ||
					row["small"].String != "-32768" || row["level"].String != "32767" || row["flag"].String != "true" ||
					row["note"].String != "note ? $2 '' \\" {
					t.Errorf("values not stored as given: %v", row)
				}
			},
		},
		{
			name: nilJSONCase,
			make: func(id uuid.UUID) *ipProbe { return &ipProbe{ID: id, Body: "x", At: explicit} },
			// bun marshals a nil json.RawMessage of a jsonb column to JSON null.
			check: func(t *testing.T, row map[string]sql.NullString) {
				if row["extra"] != (sql.NullString{String: "null", Valid: true}) {
					t.Errorf("nil json.RawMessage stored as %s, want JSON null as bun writes it", showNull(row["extra"]))
				}
			},
		},
		{
			name: "empty JSON values and false",
			make: func(id uuid.UUID) *ipProbe {
				return &ipProbe{ID: id, Body: "", Doc: json.RawMessage(`{}`), Extra: json.RawMessage(`null`),
					Tags: map[string]any{}, Flag: false, At: explicit}
			},
		},
		{
			name: "sub-microsecond time and non-UTC zone",
			make: func(id uuid.UUID) *ipProbe {
				at := time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("y", -(7*3600+15*60)))
				return &ipProbe{ID: id, Body: "t", Extra: json.RawMessage(`"t"`), At: at, SeenAt: ptr(at), CreatedAt: at.Add(123 * time.Nanosecond)}
			},
		},
	}
}

// TestBatchInsertWritesWhatBunWrites compares, case by case, the row a one-insert batch writes
// with the row bun's own INSERT writes for the same values in the same transaction (so now()
// agrees).
func TestBatchInsertWritesWhatBunWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, ipProbeDDL)
	for _, c := range ipCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bunID, batchID := uuid.New(), uuid.New()
			err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.NewInsert().Model(c.make(bunID)).Exec(ctx); err != nil {
					return fmt.Errorf("bun insert: %w", err)
				}
				b := db.NewBatch(tx)
				if err := b.Insert(c.make(batchID)); err != nil {
					return fmt.Errorf("batch insert: %w", err)
				}
				if err := b.Exec(ctx, tx); err != nil {
					return fmt.Errorf("batch exec: %w", err)
				}
				compareProbes(ctx, t, tx, bunID, batchID, c.check)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBatchInsertManyRowsInOneStatement writes every case in one multi-row batch (the WITH
// form, with placeholders numbered across the rows) and compares with bun's rows.
func TestBatchInsertManyRowsInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, ipProbeDDL)
	cases := ipCases()
	bunIDs, batchIDs := make([]uuid.UUID, len(cases)), make([]uuid.UUID, len(cases))
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		for i, c := range cases {
			bunIDs[i], batchIDs[i] = uuid.New(), uuid.New()
			if _, err := tx.NewInsert().Model(c.make(bunIDs[i])).Exec(ctx); err != nil {
				return fmt.Errorf("bun insert %s: %w", c.name, err)
			}
			if err := b.Insert(c.make(batchIDs[i])); err != nil {
				return fmt.Errorf("batch insert %s: %w", c.name, err)
			}
		}
		if b.Len() != len(cases) {
			t.Errorf("Len %d, want %d", b.Len(), len(cases))
		}
		if err := b.Exec(ctx, tx); err != nil {
			return fmt.Errorf("batch exec: %w", err)
		}
		if b.Len() != 0 {
			t.Errorf("Len %d after Exec, want 0", b.Len())
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) { compareProbes(ctx, t, tx, bunIDs[i], batchIDs[i], c.check) })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func compareProbes(ctx context.Context, t *testing.T, idb bun.IDB, bunID, batchID uuid.UUID, check func(*testing.T, map[string]sql.NullString)) {
	t.Helper()
	want := readProbe(ctx, t, idb, bunID)
	got := readProbe(ctx, t, idb, batchID)
	for _, col := range ipColumns {
		if got[col] != want[col] {
			t.Errorf("column %s: batch wrote %s, bun wrote %s", col, showNull(got[col]), showNull(want[col]))
		}
	}
	if check != nil {
		check(t, got)
	}
}

func TestBatchInsertKeepsMicrosecondsOfExplicitTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, ipProbeDDL)
	id := uuid.New()
	b := db.NewBatch(d.Bun)
	if err := b.Insert(&ipProbe{ID: id, Body: "t", Extra: json.RawMessage(`{}`), CreatedAt: explicit, At: explicit, SeenAt: ptr(explicit.Add(time.Microsecond))}); err != nil {
		t.Fatal(err)
	}
	if err := b.Exec(ctx, d.Bun); err != nil {
		t.Fatal(err)
	}
	var createdAt, at, seenAt time.Time
	if err := d.Bun.QueryRowContext(ctx, "SELECT created_at, at, seen_at FROM ip_probe WHERE id = "+sqlLiteral(id.String())).
		Scan(&createdAt, &at, &seenAt); err != nil {
		t.Fatal(err)
	}
	if !createdAt.Equal(explicit) || !at.Equal(explicit) || !seenAt.Equal(explicit.Add(time.Microsecond)) {
		t.Errorf("times read back %v, %v, %v; want %v and %v", createdAt, at, seenAt, explicit, explicit.Add(time.Microsecond))
	}
}

func TestBatchInsertRejectsNonPointerModel(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	b := db.NewBatch(d.Bun)
	if err := b.Insert(ipProbe{}); err == nil {
		t.Error("a struct value was accepted as a model")
	}
	if err := b.Insert((*ipProbe)(nil)); err == nil {
		t.Error("a nil pointer was accepted as a model")
	}
	if b.Len() != 0 {
		t.Errorf("Len %d after rejected inserts, want 0", b.Len())
	}
}

const fkDDL = `CREATE TABLE ip_parent (id uuid PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE ip_child (id uuid PRIMARY KEY, parent_id uuid NOT NULL REFERENCES ip_parent (id), body text NOT NULL)`

type ipParent struct {
	bun.BaseModel `bun:"table:ip_parent"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	Name          string    `bun:"name"`
}

type ipChild struct {
	bun.BaseModel `bun:"table:ip_child"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	ParentID      uuid.UUID `bun:"parent_id,type:uuid"`
	Body          string    `bun:"body"`
}

func countRows(ctx context.Context, t *testing.T, idb bun.IDB, table string) int {
	t.Helper()
	var n int
	if err := idb.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBatchInsertChildBeforeParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	parent, child := uuid.New(), uuid.New()
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		if err := b.Insert(&ipChild{ID: child, ParentID: parent, Body: "child first?"}); err != nil {
			return err
		}
		if err := b.Insert(&ipParent{ID: parent, Name: "parent"}); err != nil {
			return err
		}
		return b.Exec(ctx, tx)
	})
	if err != nil {
		t.Fatalf("all-insert batch with the child before its parent: %v", err)
	}
	var got ipChild
	if err := d.Bun.NewSelect().Model(&got).Where("id = ?", child).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if got.ParentID != parent || got.Body != "child first?" {
		t.Errorf("child row %+v", got)
	}
	if n := countRows(ctx, t, d.Bun, "ip_parent"); n != 1 {
		t.Errorf("%d parent rows, want 1", n)
	}

	// Mixed with another statement, the batch runs statement by statement, so the same order
	// breaks the foreign key: this is what the one-statement form buys.
	parent2, child2 := uuid.New(), uuid.New()
	err = d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		if err := b.Insert(&ipChild{ID: child2, ParentID: parent2, Body: "orphan"}); err != nil {
			return err
		}
		if err := b.Insert(&ipParent{ID: parent2, Name: "parent 2"}); err != nil {
			return err
		}
		b.AddSQL("SELECT 1")
		return b.Exec(ctx, tx)
	})
	if err == nil || !strings.Contains(err.Error(), "ip_child_parent_id_fkey") {
		t.Fatalf("mixed batch with the child first: %v, want the foreign key violation", err)
	}
	if n := countRows(ctx, t, d.Bun, "ip_child"); n != 1 {
		t.Errorf("%d child rows after the failed mixed batch, want 1", n)
	}
}

func TestBatchInsertUniqueViolationLeavesNoRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	existing := uuid.New()
	if _, err := d.Bun.NewInsert().Model(&ipParent{ID: existing, Name: "taken"}).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		second string // the name the second insert uses
	}{
		{"within the batch", "dup"},
		{"against a committed row", "taken"},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, second, third := uuid.New(), uuid.New(), uuid.New()
			err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				b := db.NewBatch(tx)
				for _, p := range []*ipParent{{ID: first, Name: "dup"}, {ID: second, Name: c.second}} {
					if err := b.Insert(p); err != nil {
						return err
					}
				}
				if err := b.Insert(&ipChild{ID: third, ParentID: first, Body: "c"}); err != nil {
					return err
				}
				return b.Exec(ctx, tx)
			})
			if !db.IsUniqueViolation(err, "ip_parent_name_key") {
				t.Fatalf("err %v, want the unique violation on ip_parent_name_key", err)
			}
			var n int
			if err := d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM ip_parent WHERE id IN (?, ?)", first, second).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d parent rows of the failed batch survived", n)
			}
			if n := countRows(ctx, t, d.Bun, "ip_child"); n != 0 {
				t.Errorf("%d child rows of the failed batch survived", n)
			}
			var name string
			if err := d.Bun.QueryRowContext(ctx, "SELECT name FROM ip_parent WHERE id = ?", existing).Scan(&name); err != nil || name != "taken" {
				t.Errorf("committed row: %q, %v", name, err)
			}
		})
	}
}

func TestBatchMixedInsertAndSQLKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	parent, child := uuid.New(), uuid.New()
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		if err := b.Insert(&ipParent{ID: parent, Name: "p ? $1 it's"}); err != nil {
			return err
		}
		// Runs after the insert before it and sees its row.
		b.AddSQL("UPDATE ip_parent SET name = name || ? WHERE id = ?", " updated?", parent)
		if err := b.Insert(&ipChild{ID: child, ParentID: parent, Body: tricky}); err != nil {
			return err
		}
		if err := b.Add(tx.NewUpdate().Model((*ipChild)(nil)).Set("body = body || ?", "!").Where("id = ?", child)); err != nil {
			return err
		}
		if b.Len() != 4 {
			t.Errorf("Len %d, want 4", b.Len())
		}
		return b.Exec(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	var name, body string
	if err := d.Bun.QueryRowContext(ctx, "SELECT name FROM ip_parent WHERE id = ?", parent).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "p ? $1 it's updated?" {
		t.Errorf("parent name %q: the UPDATE did not see the row inserted before it", name)
	}
	if err := d.Bun.QueryRowContext(ctx, "SELECT body FROM ip_child WHERE id = ?", child).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if body != tricky+"!" {
		t.Errorf("child body %q, want %q", body, tricky+"!")
	}
}

// TestBatchInsertIsPreparedOnTheConnection checks that an all-insert batch reaches the driver
// with arguments, so the connection prepares it once and reuses it.
func TestBatchInsertIsPreparedOnTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	conn, err := d.Bun.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 3 {
		parent := uuid.New()
		b := db.NewBatch(conn)
		if err := b.Insert(&ipParent{ID: parent, Name: fmt.Sprintf("p%d", i)}); err != nil {
			t.Fatal(err)
		}
		if err := b.Insert(&ipChild{ID: uuid.New(), ParentID: parent, Body: "c"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Exec(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := conn.Conn.QueryRowContext(ctx,
		"SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'WITH b0 AS (INSERT INTO %'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d prepared batch statements after three batches of the same shape, want 1", n)
	}
	if got := countRows(ctx, t, d.Bun, "ip_child"); got != 3 {
		t.Errorf("%d child rows, want 3", got)
	}
}

// newDBWith is a fresh test database with the tables of ddl.
func newDBWith(ctx context.Context, t *testing.T, ddl string) *dbtest.DB {
	t.Helper()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return d
}
