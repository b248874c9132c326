package db_test

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"asterion/db"
	"asterion/db/dbtest"
)

// functionDefsSQL lists the app's functions (not an extension's) with their full definitions.
const functionDefsSQL = `SELECT p.proname, pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public' AND p.proname LIKE 'asterion\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
ORDER BY 1, 2`

func functionDefs(t *testing.T, pool *pgxpool.Pool) (names []string, defs []string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), functionDefsSQL)
	if err != nil {
		t.Fatalf("list functions: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
		defs = append(defs, def)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names, defs
}

func newMigrator(t *testing.T) (*db.Migrator, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	u := dbtest.NewEmpty(t)
	bunDB, err := db.Open(ctx, db.OpenConfig{URL: u, WaitFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bunDB.Close() })
	pool, err := db.OpenPool(ctx, u, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m, err := db.NewMigrator(bunDB, pool)
	if err != nil {
		t.Fatal(err)
	}
	return m, pool
}

// copyFunctions is the embedded db/functions as a map a test may edit.
func copyFunctions(t *testing.T) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(db.FunctionFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.FunctionFS(), p)
		out[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFunctionFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, pool := newMigrator(t)
	files := copyFunctions(t)
	var fileNames []string
	for p := range files {
		fileNames = append(fileNames, strings.TrimSuffix(p, ".sql"))
	}
	slices.Sort(fileNames)

	applied, err := m.Up(ctx)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	for _, n := range fileNames {
		if !slices.Contains(applied, "function "+n) {
			t.Errorf("first up did not apply db/functions/%s.sql: %v", n, applied)
		}
	}
	names, fresh := functionDefs(t, pool)
	if !slices.Equal(names, fileNames) {
		t.Fatalf("functions in the database %v, files in db/functions %v: every function needs its file there", names, fileNames)
	}
	if again, err := m.Up(ctx); err != nil || len(again) != 0 {
		t.Fatalf("up with nothing changed applied %v, %v", again, err)
	}

	band := func() int {
		var b int
		if err := pool.QueryRow(ctx, `SELECT asterion_band(5::smallint)`).Scan(&b); err != nil {
			t.Fatalf("call asterion_band: %v", err)
		}
		return b
	}
	if got := band(); got != 1 {
		t.Fatalf("asterion_band(5) = %d before the edit, want 1", got)
	}

	t.Run("edited body applied on the next up", func(t *testing.T) {
		edited := copyFunctions(t)
		f := edited["asterion_band.sql"]
		f.Data = []byte(strings.Replace(string(f.Data), "WHEN p <= 10 THEN 1", "WHEN p <= 10 THEN 7", 1))
		m.UseFunctions(edited)
		applied, err := m.Up(ctx)
		if err != nil {
			t.Fatalf("up after the edit: %v", err)
		}
		if !slices.Equal(applied, []string{"function asterion_band"}) {
			t.Fatalf("up after editing asterion_band.sql applied %v", applied)
		}
		if got := band(); got != 7 {
			t.Fatalf("asterion_band(5) = %d after the edit, want 7", got)
		}
	})

	t.Run("back to the files ends as a fresh database", func(t *testing.T) {
		m.UseFunctions(db.FunctionFS())
		applied, err := m.Up(ctx)
		if err != nil || !slices.Equal(applied, []string{"function asterion_band"}) {
			t.Fatalf("up back to db/functions applied %v, %v", applied, err)
		}
		_, defs := functionDefs(t, pool)
		_, template := functionDefs(t, dbtest.New(t).Pool)
		if !slices.Equal(defs, fresh) || !slices.Equal(defs, template) {
			t.Fatal("the functions of an edited and restored database differ from a fresh one's")
		}
	})

	t.Run("down removes every function", func(t *testing.T) {
		if _, err := m.Down(ctx, true); err != nil {
			t.Fatalf("down: %v", err)
		}
		if names, _ := functionDefs(t, pool); len(names) != 0 {
			t.Fatalf("functions left after down: %v", names)
		}
		applied, err := m.Up(ctx)
		if err != nil || !slices.Contains(applied, "function asterion_band") {
			t.Fatalf("up after down applied %v, %v", applied, err)
		}
		if _, defs := functionDefs(t, pool); !slices.Equal(defs, fresh) {
			t.Fatal("the functions after down and up differ from a fresh database's")
		}
	})
}
