package db

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLockKey serialises migrations between processes starting at once.
const migrationLockKey int64 = 0x617374726d6967 // "astrmig"

// Migrator applies the app's migrations (bun/migrate, embedded SQL, marked applied only on
// success) and River's (rivermigrate over pgx, so the schema is exactly what River's own
// `river migrate-up` makes), then the function files of db/functions (applyFunctions).
type Migrator struct {
	app       *migrate.Migrator
	river     *rivermigrate.Migrator[pgx.Tx]
	pool      *pgxpool.Pool
	functions fs.FS
}

// MigrationStatus describes what is applied.
type MigrationStatus struct {
	AppApplied   []string `json:"app_applied"`
	AppPending   []string `json:"app_pending"`
	RiverVersion int      `json:"river_version"`
	RiverLatest  int      `json:"river_latest"`
}

// Current reports whether nothing is pending.
func (s MigrationStatus) Current() bool {
	return len(s.AppPending) == 0 && s.RiverVersion == s.RiverLatest
}

// NewMigrator builds a Migrator over bun (app tables) and a pgx pool (River's tables).
func NewMigrator(bunDB *bun.DB, pool *pgxpool.Pool) (*Migrator, error) {
	migrations := migrate.NewMigrations()
	if err := migrations.Discover(migrationFS); err != nil {
		return nil, fmt.Errorf("discover app migrations: %w", err)
	}
	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	return &Migrator{
		app:       migrate.NewMigrator(bunDB, migrations, migrate.WithMarkAppliedOnSuccess(true)),
		river:     rm,
		pool:      pool,
		functions: defaultFunctions(),
	}, nil
}

// withLock runs f while holding a session advisory lock, so two processes never migrate at once.
func (m *Migrator) withLock(ctx context.Context, f func() error) error {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection for migration lock: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, migrationLockSQL, migrationLockKey); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), migrationUnlockSQL, migrationLockKey)
	}()
	return f()
}

// Up applies River's migrations, then the app's, then the function files that changed (all of
// them when an app migration ran), and returns what it applied.
func (m *Migrator) Up(ctx context.Context) ([]string, error) {
	var applied []string
	err := m.withLock(ctx, func() error {
		res, err := m.river.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return fmt.Errorf("river migrations up: %w", err)
		}
		for _, v := range res.Versions {
			applied = append(applied, fmt.Sprintf("river %03d %s", v.Version, v.Name))
		}
		if err := m.app.Init(ctx); err != nil {
			return fmt.Errorf("init app migration tables: %w", err)
		}
		group, err := m.app.Migrate(ctx)
		if err != nil {
			return fmt.Errorf("app migrations up: %w", err)
		}
		for _, mig := range group.Migrations {
			applied = append(applied, "app "+mig.String())
		}
		functions, err := m.applyFunctions(ctx, len(group.Migrations) > 0)
		if err != nil {
			return fmt.Errorf("functions up: %w", err)
		}
		applied = append(applied, functions...)
		return nil
	})
	return applied, err
}

// Down rolls back the last applied group of app migrations, or with all every app migration
// and then River's whole schema.
func (m *Migrator) Down(ctx context.Context, all bool) ([]string, error) {
	var rolled []string
	err := m.withLock(ctx, func() error {
		if err := m.app.Init(ctx); err != nil {
			return fmt.Errorf("init app migration tables: %w", err)
		}
		for {
			group, err := m.app.Rollback(ctx)
			if err != nil {
				return fmt.Errorf("app migrations down: %w", err)
			}
			for _, mig := range group.Migrations {
				rolled = append(rolled, "app "+mig.String())
			}
			if !all || group.IsZero() {
				break
			}
		}
		if !all {
			return nil
		}
		res, err := m.river.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
		if err != nil {
			return fmt.Errorf("river migrations down: %w", err)
		}
		for _, v := range res.Versions {
			rolled = append(rolled, fmt.Sprintf("river %03d %s", v.Version, v.Name))
		}
		return nil
	})
	return rolled, err
}

// Status reports applied and pending migrations of both lines without changing anything.
func (m *Migrator) Status(ctx context.Context) (MigrationStatus, error) {
	var st MigrationStatus
	all := m.river.AllVersions()
	st.RiverLatest = all[len(all)-1].Version
	existing, err := m.river.ExistingVersions(ctx)
	if err != nil && !isUndefinedTable(err) {
		return st, fmt.Errorf("river migration status: %w", err)
	}
	if len(existing) > 0 {
		st.RiverVersion = existing[len(existing)-1].Version
	}
	ms, err := m.app.MigrationsWithStatus(ctx)
	if err != nil && !isUndefinedTable(err) {
		return st, fmt.Errorf("app migration status: %w", err)
	}
	if err != nil { // no bun_migrations table yet: everything is pending
		st.AppPending = append(st.AppPending, m.appAll()...)
		return st, nil
	}
	for _, mig := range ms {
		if mig.IsApplied() {
			st.AppApplied = append(st.AppApplied, mig.String())
		} else {
			st.AppPending = append(st.AppPending, mig.String())
		}
	}
	return st, nil
}

// Validate checks that River's tables are exactly what River's migrations leave.
func (m *Migrator) Validate(ctx context.Context) error {
	res, err := m.river.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("validate river schema: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("river schema not current: %s", strings.Join(res.Messages, "; "))
	}
	return nil
}

func (m *Migrator) appAll() []string {
	ms := migrate.NewMigrations()
	if err := ms.Discover(migrationFS); err != nil {
		return nil
	}
	var names []string
	for _, mig := range ms.Sorted() {
		names = append(names, mig.String())
	}
	return names
}

func isUndefinedTable(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "42P01") || strings.Contains(err.Error(), "does not exist"))
}

// RiverVersionTag names the River release whose migrations are embedded, for cache keys.
const RiverVersionTag = "river v0.51.2"

// MigrationFS exposes the embedded app migrations (read-only) for tests and tooling.
func MigrationFS() embed.FS { return migrationFS }
