package db_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"asterion/db"
	"asterion/db/dbtest"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)

	// A query the database answers with an error is not unavailability.
	_, err := d.Bun.ExecContext(ctx, "SELEC 1")
	if err == nil || db.IsUnavailable(err) {
		t.Errorf("syntax error %v counted as unavailable", err)
	}
	if db.IsUnavailable(nil) || db.IsUnavailable(errors.New("no rows")) {
		t.Error("nil or a plain error counted as unavailable")
	}

	// A backend terminated under an open transaction: the next statement fails with the
	// administrator-shutdown error or a dropped connection.
	tx, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, "SELECT pg_terminate_backend(?)", pid); err != nil {
		t.Fatal(err)
	}
	_, err = tx.ExecContext(ctx, "SELECT 1")
	_ = tx.Rollback()
	if err == nil || !db.IsUnavailable(fmt.Errorf("submit: %w", err)) {
		t.Errorf("statement on a terminated backend: %v, not counted as unavailable", err)
	}

	// Nothing listens: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.Dial("tcp", addr)
	if err == nil || !db.IsUnavailable(fmt.Errorf("connect: %w", err)) {
		t.Errorf("refused connection %v not counted as unavailable", err)
	}
}
