package db_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"asterion/db/dbtest"
)

var update = flag.Bool("update", false, "rewrite db/schema.sql from a freshly migrated database")

const schemaFile = "schema.sql"

// TestSchemaFile keeps db/schema.sql, the schema to read instead of replaying the migrations,
// equal to what the migrations and function files make.
func TestSchemaFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := dbtest.PgDump(); err != nil {
		t.Skipf("no pg_dump to compare db/schema.sql with: %v", err)
	}
	got, err := dbtest.DumpSchema(ctx, dbtest.New(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("read db/schema.sql (run make schema to write it): %v", err)
	}
	if wantMajor, gotMajor := dbtest.SchemaMajor(string(want)), dbtest.SchemaMajor(got); wantMajor != gotMajor {
		t.Skipf("db/schema.sql was dumped from PostgreSQL %s, this server is %s: its text would differ", wantMajor, gotMajor)
	}
	if got != string(want) {
		t.Fatalf("db/schema.sql differs from a freshly migrated database: run make schema and commit it\n%s",
			firstDifference(string(want), got))
	}
}

// firstDifference shows the first line where want and got part, with a little context.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  schema.sql: %s\n  database:   %s", i+1, wl, gl)
		}
	}
	return ""
}
