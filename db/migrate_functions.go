package db

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed functions/*.sql
var functionFS embed.FS

// functionFile is one file of db/functions: a function's CREATE OR REPLACE (or, for an
// overloaded name, each form's), named after the function.
type functionFile struct {
	name string
	text string
	sum  string
}

// defaultFunctions is db/functions with the files at its root.
func defaultFunctions() fs.FS {
	sub, err := fs.Sub(functionFS, "functions")
	if err != nil {
		panic(fmt.Sprintf("embedded db/functions: %v", err))
	}
	return sub
}

// FunctionFS exposes the embedded function files (read-only, at the root) for tests and tooling.
func FunctionFS() fs.FS { return defaultFunctions() }

// readFunctionFiles reads every .sql file at the root of fsys, in name order.
func readFunctionFiles(fsys fs.FS) ([]functionFile, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list function files: %w", err)
	}
	files := make([]functionFile, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read function file %s: %w", n, err)
		}
		sum := sha256.Sum256(b)
		files = append(files, functionFile{
			name: strings.TrimSuffix(path.Base(n), ".sql"),
			text: string(b),
			sum:  hex.EncodeToString(sum[:]),
		})
	}
	return files, nil
}

// applyFunctions brings the database's functions to the text of db/functions, after the
// migrations, in one transaction: every file whose hash differs from the one recorded when it
// was last applied, or every file when all is set.
//
// The migrations keep the functions' earlier versions as history (a trigger's migration needs
// its function to exist), and a migration may still replace or drop one, so the Up that applied
// any migration applies all the files; only an Up with no migration to apply trusts the hashes.
// A fresh database and an upgraded one therefore end with the same functions. Hashes, rather
// than re-applying every file on every start, keep a start that changes nothing from rewriting
// the catalogue (and invalidating every session's cached plans of those functions) each time a
// process starts, and make Up report the functions it changed.
func (m *Migrator) applyFunctions(ctx context.Context, all bool) ([]string, error) {
	files, err := readFunctionFiles(m.functions)
	if err != nil {
		return nil, err
	}
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin applying functions: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	recorded, err := functionHashes(ctx, tx)
	if err != nil {
		return nil, err
	}
	var applied []string
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, f.name)
		if !all && recorded[f.name] == f.sum {
			continue
		}
		// No arguments: pgx sends the file by the simple protocol, which runs every statement
		// in it (an overloaded name's file holds one CREATE per form).
		if _, err := tx.Exec(ctx, f.text); err != nil {
			return nil, fmt.Errorf("apply function file %s.sql: %w", f.name, err)
		}
		if _, err := tx.Exec(ctx, functionRecordSQL, f.name, f.sum); err != nil {
			return nil, fmt.Errorf("record function file %s.sql: %w", f.name, err)
		}
		applied = append(applied, "function "+f.name)
	}
	if _, err := tx.Exec(ctx, functionForgetSQL, names); err != nil {
		return nil, fmt.Errorf("forget removed function files: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit applied functions: %w", err)
	}
	return applied, nil
}

// functionHashes reads the hash of every function file as last applied.
func functionHashes(ctx context.Context, tx pgx.Tx) (map[string]string, error) {
	rows, err := tx.Query(ctx, functionHashesSQL)
	if err != nil {
		return nil, fmt.Errorf("read applied function hashes: %w", err)
	}
	recorded := map[string]string{}
	var name, sum string
	_, err = pgx.ForEachRow(rows, []any{&name, &sum}, func() error {
		recorded[name] = sum
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read applied function hashes: %w", err)
	}
	return recorded, nil
}
