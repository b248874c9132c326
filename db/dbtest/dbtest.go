// Package dbtest gives every test its own real PostgreSQL database, cloned from a template that
// is migrated once per set of migrations, so tests run in parallel without sharing state.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"asterion/db"
)

// DB is one test's private database.
type DB struct {
	Bun  *bun.DB
	Pool *pgxpool.Pool
	URL  db.URL
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// New creates a fresh migrated database for t and drops it when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	ctx := context.Background()
	base := serverBase(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx, base) })
	if templateErr != nil {
		t.Fatalf("test template database: %v", templateErr)
	}
	name := "asterion_t_" + randomHex(8)
	if err := adminExec(ctx, base, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	u := base.WithDatabase(name)
	bunDB, err := db.Open(ctx, db.OpenConfig{URL: u, WaitFor: 5 * time.Second, MaxOpenConns: 10})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	pool, err := db.OpenPool(ctx, u, 10)
	if err != nil {
		t.Fatalf("open test pool: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		_ = bunDB.Close()
		_ = adminExec(context.Background(), base, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return &DB{Bun: bunDB, Pool: pool, URL: u}
}

// NewEmpty creates an empty, unmigrated database for migration tests.
func NewEmpty(t testing.TB) db.URL {
	t.Helper()
	ctx := context.Background()
	base := serverBase(t)
	name := "asterion_t_" + randomHex(8)
	if err := adminExec(ctx, base, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create empty test database: %v", err)
	}
	t.Cleanup(func() {
		_ = adminExec(context.Background(), base, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return base.WithDatabase(name)
}

// ensureTemplate builds (once per migration set, across concurrent test binaries) a migrated
// template database and returns its name.
func ensureTemplate(ctx context.Context, base db.URL) (string, error) {
	name := "asterion_tmpl_" + migrationsHash()
	conn, err := pgx.Connect(ctx, base.WithDatabase("postgres").String())
	if err != nil {
		return "", fmt.Errorf("connect to maintenance database: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7171)"); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(7171)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_b"
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	if err := migrateURL(ctx, base.WithDatabase(building)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", fmt.Errorf("rename template: %w", err)
	}
	return name, nil
}

// serverBase is the URL of the server the tests use, failing t when there is none.
func serverBase(t testing.TB) db.URL {
	t.Helper()
	srv, err := FindServer()
	if err != nil {
		t.Fatalf("test database server: %v", err)
	}
	base, err := db.ParseURL(srv.URL)
	if err != nil {
		t.Fatalf("test database URL: %v", err)
	}
	return base
}

func migrateURL(ctx context.Context, u db.URL) error {
	bunDB, err := db.Open(ctx, db.OpenConfig{URL: u, WaitFor: 5 * time.Second, MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer bunDB.Close()
	pool, err := db.OpenPool(ctx, u, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := db.NewMigrator(bunDB, pool)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx)
	return err
}

// migrationsHash names the template after the migration and function files, so a changed
// migration or function builds a new template instead of reusing a stale one.
func migrationsHash() string {
	h := sha256.New()
	for _, fsys := range []fs.FS{db.MigrationFS(), db.FunctionFS()} {
		_ = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, _ := fs.ReadFile(fsys, path)
			h.Write([]byte(path))
			h.Write(b)
			return nil
		})
	}
	h.Write([]byte(db.RiverVersionTag))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func adminExec(ctx context.Context, base db.URL, sql string) error {
	conn, err := pgx.Connect(ctx, base.WithDatabase("postgres").String())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
