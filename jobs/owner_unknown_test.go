package jobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// forgetfulOwner is a test owner that no longer knows any of its operations.
type forgetfulOwner struct{ reports, consumes atomic.Int64 }

func (*forgetfulOwner) Kind() string { return "test.forgetful" }

func (o *forgetfulOwner) Report(context.Context, bun.Tx, db.Operation) (Report, error) {
	o.reports.Add(1)
	return Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "the owner has no record of it"}, nil
}

func (*forgetfulOwner) Cancel(context.Context, bun.Tx, db.Operation, string, Actor) error {
	return &ErrNotCancelable{Reason: "the test owner cannot cancel"}
}

func (o *forgetfulOwner) Consume(context.Context, bun.Tx, db.Operation) error {
	o.consumes.Add(1)
	return nil
}

// steadyOwner reports running forever: its operation shows that the poller is running.
type steadyOwner struct{}

func (steadyOwner) Kind() string { return "test.steady" }

func (steadyOwner) Report(context.Context, bun.Tx, db.Operation) (Report, error) {
	return Report{Status: deferred.StatusRunning}, nil
}

func (steadyOwner) Cancel(context.Context, bun.Tx, db.Operation, string, Actor) error { return nil }

func (steadyOwner) Consume(context.Context, bun.Tx, db.Operation) error { return nil }

// TestUnknownFromOwnerEndsPolling: an owner that reports unknown ends the operation as
// unknown (terminal, consumed once), and neither PollDue nor the running poller polls it again.
func TestUnknownFromOwnerEndsPolling(t *testing.T) {
	t.Parallel()
	s, d, org, user := newInternalService(t, "unknown")
	ctx := context.Background()
	owner := &forgetfulOwner{}
	s.RegisterOwner(owner)
	s.RegisterOwner(steadyOwner{})
	var h, steady deferred.Handle
	if err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		h, err = deferred.NewHandle(deferred.HandleRequest{Kind: owner.Kind(), Owner: "test", Subject: map[string]string{"n": "1"},
			RetryAfterSeconds: 1}, s.cfg.Policy, now)
		if err != nil {
			return err
		}
		if _, err = recordAccepted(ctx, s.reg, tx, h, org, user, h.OperationID); err != nil {
			return err
		}
		// Not due until the runtime starts below.
		steady, err = deferred.NewHandle(deferred.HandleRequest{Kind: "test.steady", Owner: "test", Subject: map[string]string{"n": "2"},
			RetryAfterSeconds: 60}, s.cfg.Policy, now)
		if err != nil {
			return err
		}
		_, err = recordAccepted(ctx, s.reg, tx, steady, org, user, steady.OperationID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	due := func() {
		if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_operation SET next_poll_at = now() - interval '1 minute' WHERE id = ?",
			h.OperationID); err != nil {
			t.Fatal(err)
		}
	}
	read := func() db.Operation {
		var op db.Operation
		if err := d.Bun.NewSelect().Model(&op).Where("id = ?", h.OperationID).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		return op
	}
	due()
	n, err := s.PollDue(ctx)
	if err != nil || n != 1 {
		t.Fatalf("PollDue: %d polled, %v; want 1", n, err)
	}
	op := read()
	if op.Status != "unknown" || op.TerminalAt == nil || op.PollCount != 1 || owner.reports.Load() != 1 || owner.consumes.Load() != 1 {
		t.Fatalf("after the unknown report: status %s, terminal %v, poll_count %d, reports %d, consumes %d",
			op.Status, op.TerminalAt, op.PollCount, owner.reports.Load(), owner.consumes.Load())
	}
	doc, err := StatusDocOf(op)
	if err != nil || doc.Error == nil || doc.Error.Kind != "unknown" || !doc.Terminal() {
		t.Fatalf("status document %+v: %v", doc, err)
	}
	// Due again by the clock, it is still never polled.
	due()
	if n, err := s.PollDue(ctx); err != nil || n != 0 {
		t.Fatalf("PollDue after unknown: %d polled, %v; want 0", n, err)
	}
	if _, err := s.PollOperation(ctx, Viewer{OrgID: org, UserID: user}, h.OperationID); err != nil {
		t.Fatalf("poll-now of a terminal operation: %v", err)
	}
	// Nor by the leader's periodic poller.
	rt, err := NewRuntime(s, RuntimeConfig{Pool: d.Pool, Workers: 1, PriorityCeiling: -1, PollEvery: 200 * time.Millisecond,
		ReclaimEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_operation SET next_poll_at = now(), retry_after_seconds = 1 WHERE id = ?",
		steady.OperationID); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, 15*time.Second, "the leader's poller to poll the steady operation twice", func() bool {
		var n int
		_ = d.Bun.QueryRowContext(ctx, "SELECT poll_count FROM sa_operation WHERE id = ?", steady.OperationID).Scan(&n)
		return n >= 2
	})
	if err := rt.Stop(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if op := read(); op.PollCount != 1 || op.Status != "unknown" || owner.reports.Load() != 1 || owner.consumes.Load() != 1 {
		t.Fatalf("after the poller ran: poll_count %d, status %s, reports %d, consumes %d",
			op.PollCount, op.Status, owner.reports.Load(), owner.consumes.Load())
	}
	var hist []db.OperationHistory
	if err := d.Bun.NewSelect().Model(&hist).Where("operation_id = ?", h.OperationID).OrderExpr("seq").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Status != "pending" || hist[1].Status != "unknown" {
		t.Fatalf("history %+v, want pending then unknown", hist)
	}
}

// recordAccepted records h's registry row in tx at once, as a caller outside a job transition
// does.
func recordAccepted(ctx context.Context, reg *registry.Registry, tx bun.Tx, h deferred.Handle, org, user int64, correlation uuid.UUID) (db.Operation, error) {
	w := db.NewWrites(tx)
	op, err := reg.RecordAccepted(w, h, org, user, correlation)
	if err != nil {
		return op, err
	}
	return op, w.Send(ctx)
}
