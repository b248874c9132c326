package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// ticketOwner is a fourth operation kind, defined here and nowhere else: a ticket desk whose
// tickets are opened, picked up, closed or withdrawn. Its own ledger (a map) is the truth
// about its work; the registry only learns of it through the Owner interface.
type ticketOwner struct {
	mu       sync.Mutex
	state    map[uuid.UUID]string // open, working, closed, withdrawn
	consumed map[uuid.UUID]int
	resumed  map[uuid.UUID][]byte
}

const ticketKind = "test.ticket"

func newTicketOwner() *ticketOwner {
	return &ticketOwner{state: map[uuid.UUID]string{}, consumed: map[uuid.UUID]int{}, resumed: map[uuid.UUID][]byte{}}
}

func (*ticketOwner) Kind() string { return ticketKind }

func (o *ticketOwner) Report(_ context.Context, _ bun.Tx, op db.Operation) (registry.Report, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.state[op.ID] {
	case "open":
		// Picked up by the first look.
		o.state[op.ID] = "working"
		return registry.Report{Status: deferred.StatusRunning}, nil
	case "working":
		return registry.Report{Status: deferred.StatusRunning}, nil
	case "closed":
		return registry.Report{Status: deferred.StatusCompleted, Result: json.RawMessage(`{"ticket":"closed"}`)}, nil
	}
	return registry.Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "no such ticket"}, nil
}

func (o *ticketOwner) Cancel(_ context.Context, _ bun.Tx, op db.Operation, _ string, _ registry.Actor) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state[op.ID] == "closed" {
		return &registry.ErrNotCancelable{Reason: "the ticket is closed"}
	}
	o.state[op.ID] = "withdrawn"
	return nil
}

func (o *ticketOwner) Consume(_ context.Context, _ bun.Tx, op db.Operation) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.consumed[op.ID]++
	return nil
}

// Resume receives the continuation a ticket left on another ticket it waits for.
func (o *ticketOwner) Resume(_ context.Context, _ bun.Tx, awaited db.Operation, data []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resumed[awaited.ID] = data
	return nil
}

func (o *ticketOwner) set(id uuid.UUID, state string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.state[id] = state
}

func (o *ticketOwner) counts(id uuid.UUID) (consumed int, resumed []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.consumed[id], o.resumed[id]
}

// TestFourthKindIsOnePackageThatRegistersAnOwner: adding an operation kind means defining an
// owner and registering it, and nothing else. A kind the rest of the product has never heard
// of is accepted, polled, cancelled and completed through the registry's public API alone,
// with status documents, a verifying history chain, settle subscribers, a resumed continuation
// and expiry through the owner.
func TestFourthKindIsOnePackageThatRegistersAnOwner(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	org, user := orgUser(t, d.Bun)
	other, stranger := orgUser(t, d.Bun)

	reg, err := registry.New(registry.Config{DB: d.Bun, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	owner := newTicketOwner()
	reg.Register(owner)
	reg.RegisterResumer("test.desk", owner)
	var settledMu sync.Mutex
	settled := map[uuid.UUID]string{}
	reg.OnSettled(func(_ context.Context, _ *db.Writes, s registry.Settled) error {
		settledMu.Lock()
		defer settledMu.Unlock()
		settled[s.Op.ID] = s.Was + "->" + s.Op.Status
		return nil
	})
	commits := 0
	reg.NotifyCommits(func() { commits++ })
	if kinds := reg.Kinds(); len(kinds) != 1 || kinds[0] != ticketKind {
		t.Fatalf("Kinds() = %v, want [%s]", kinds, ticketKind)
	}

	// Accept two tickets; the second waits on the first with a continuation.
	var first, second deferred.Handle
	if err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		now, err := registry.TxNow(ctx, tx)
		if err != nil {
			return err
		}
		for i, h := range []*deferred.Handle{&first, &second} {
			*h, err = deferred.NewHandle(deferred.HandleRequest{Kind: ticketKind, Owner: "test.desk",
				Subject: map[string]string{"ticket": string(rune('a' + i))}, RetryAfterSeconds: 1}, reg.Policy(), now)
			if err != nil {
				return err
			}
			if _, err := recordAccepted(ctx, reg, tx, *h, org, user, h.OperationID); err != nil {
				return err
			}
			owner.set(h.OperationID, "open")
		}
		_, err = registry.Suspend(ctx, tx, first.OperationID, "test.desk", []byte(`{"then":"b"}`), second.OperationID)
		return err
	}); err != nil {
		t.Fatalf("accept tickets: %v", err)
	}
	me := registry.Viewer{OrgID: org, UserID: user}
	status := func(id uuid.UUID) deferred.StatusDoc {
		t.Helper()
		doc, err := reg.OperationStatus(ctx, me, id)
		if err != nil {
			t.Fatalf("status of %s: %v", id, err)
		}
		return doc
	}
	if doc := status(first.OperationID); doc.Status != deferred.StatusPending || doc.Kind != ticketKind {
		t.Fatalf("accepted ticket: %+v", doc)
	}

	// The poller asks the owner: the ticket was picked up.
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_operation SET next_poll_at = now() - interval '1 minute' WHERE id = ?",
		first.OperationID); err != nil {
		t.Fatal(err)
	}
	if n, err := reg.PollDue(ctx); err != nil || n != 1 {
		t.Fatalf("PollDue: %d polled, %v; want 1", n, err)
	}
	if doc := status(first.OperationID); doc.Status != deferred.StatusRunning || !doc.Cancel.IsCancelable() {
		t.Fatalf("after the poll: %+v", doc)
	}
	// Poll-now while it still works changes nothing.
	if doc, err := reg.PollOperation(ctx, me, first.OperationID); err != nil || doc.Status != deferred.StatusRunning {
		t.Fatalf("PollOperation: %+v, %v", doc, err)
	}

	// Another org sees neither ticket.
	them := registry.Viewer{OrgID: other, UserID: stranger}
	if _, err := reg.PollOperation(ctx, them, first.OperationID); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("another org polls: %v, want ErrNotFound", err)
	}
	if _, err := reg.CancelOperation(ctx, them, second.OperationID, registry.Actor{Name: "stranger"}); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("another org cancels: %v, want ErrNotFound", err)
	}

	// Cancel the second ticket through its owner.
	doc, err := reg.CancelOperation(ctx, me, second.OperationID, registry.Actor{UserID: &user, Name: "member"})
	if err != nil || doc.Status != deferred.StatusCancelled {
		t.Fatalf("CancelOperation: %+v, %v", doc, err)
	}
	owner.mu.Lock()
	withdrawn := owner.state[second.OperationID]
	owner.mu.Unlock()
	if withdrawn != "withdrawn" {
		t.Fatalf("the owner's ledger says %q after cancel, want withdrawn", withdrawn)
	}
	if _, err := reg.CancelOperation(ctx, me, second.OperationID, registry.Actor{Name: "member"}); !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("cancel a cancelled ticket: %v, want ErrConflict", err)
	}

	// The owner closes the first ticket and records it: completed, consumed, settled, and the
	// continuation that waited on it resumed with its bytes.
	owner.set(first.OperationID, "closed")
	if err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		_, err := reg.Record(ctx, tx, first.OperationID, registry.Report{Status: deferred.StatusCompleted,
			Result: json.RawMessage(`{"ticket":"closed"}`)})
		return err
	}); err != nil {
		t.Fatalf("record completion: %v", err)
	}
	doc = status(first.OperationID)
	if doc.Status != deferred.StatusCompleted || string(doc.Result) != `{"ticket":"closed"}` {
		t.Fatalf("completed ticket: %+v (result %s)", doc, doc.Result)
	}
	if _, err := reg.CancelOperation(ctx, me, first.OperationID, registry.Actor{Name: "member"}); !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("cancel a completed ticket: %v, want ErrConflict", err)
	}
	for id, want := range map[uuid.UUID]string{first.OperationID: "running->completed", second.OperationID: "pending->cancelled"} {
		if n, _ := owner.counts(id); n != 1 {
			t.Fatalf("operation %s consumed %d times, want 1", id, n)
		}
		settledMu.Lock()
		got := settled[id]
		settledMu.Unlock()
		if got != want {
			t.Fatalf("settle subscriber saw %q for %s, want %q", got, id, want)
		}
	}
	if _, data := owner.counts(first.OperationID); string(data) != `{"then":"b"}` {
		t.Fatalf("resumed with %q, want the stored continuation", data)
	}
	// The registry's own transactions that committed: the due poll, the poll-now and the one
	// cancel that went through (refused ones roll back and announce nothing).
	if commits != 3 {
		t.Fatalf("commit hook ran %d times, want 3", commits)
	}

	// A third ticket outlives its expiry: the poller expires it through its owner's Cancel.
	var third deferred.Handle
	if err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		now, err := registry.TxNow(ctx, tx)
		if err != nil {
			return err
		}
		if third, err = deferred.NewHandle(deferred.HandleRequest{Kind: ticketKind, Owner: "test.desk",
			Subject: map[string]string{"ticket": "c"}, RetryAfterSeconds: 1}, reg.Policy(), now); err != nil {
			return err
		}
		_, err = recordAccepted(ctx, reg, tx, third, org, user, third.OperationID)
		return err
	}); err != nil {
		t.Fatalf("accept the third ticket: %v", err)
	}
	owner.set(third.OperationID, "open")
	if _, err := d.Bun.ExecContext(ctx, `UPDATE sa_operation SET expires_at = now() - interval '1 second',
		next_poll_at = now() - interval '1 minute' WHERE id = ?`, third.OperationID); err != nil {
		t.Fatal(err)
	}
	if n, err := reg.PollDue(ctx); err != nil || n != 1 {
		t.Fatalf("PollDue of the expired ticket: %d polled, %v; want 1", n, err)
	}
	if doc := status(third.OperationID); doc.Status != deferred.StatusExpired || doc.Error == nil || doc.Error.Kind != registry.ErrorKindExpired {
		t.Fatalf("expired ticket: %+v", doc)
	}
	owner.mu.Lock()
	expired := owner.state[third.OperationID]
	owner.mu.Unlock()
	if expired != "withdrawn" || reg.Stats().Expiries.Load() != 1 {
		t.Fatalf("after expiry the ledger says %q and the poller counted %d expiries; want withdrawn and 1",
			expired, reg.Stats().Expiries.Load())
	}

	// Each history is a verifying chain whose head is the one the row records.
	for id, want := range map[uuid.UUID][]deferred.Status{
		first.OperationID:  {deferred.StatusPending, deferred.StatusRunning, deferred.StatusCompleted},
		second.OperationID: {deferred.StatusPending, deferred.StatusCancelled},
		third.OperationID:  {deferred.StatusPending, deferred.StatusExpired},
	} {
		hist, err := reg.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != len(want) {
			t.Fatalf("history of %s: %+v, want %v", id, hist, want)
		}
		for i, e := range hist {
			if e.Status != want[i] || e.Seq != int64(i+1) {
				t.Fatalf("history of %s entry %d: %+v, want %s", id, i, e, want[i])
			}
		}
		if at, err := deferred.VerifyChain(hist); err != nil {
			t.Fatalf("history of %s breaks at %d: %v", id, at, err)
		}
		var op db.Operation
		if err := d.Bun.NewSelect().Model(&op).Where("id = ?", id).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if msg := registry.HistoryHeadMismatch(op, hist); msg != "" {
			t.Fatalf("history of %s disagrees with its row: %s", id, msg)
		}
	}
}

// orgUser inserts an org with one member.
func orgUser(t *testing.T, b *bun.DB) (org, user int64) {
	t.Helper()
	ctx := context.Background()
	name := uuid.NewString()
	if err := b.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES (?) RETURNING id", "org-"+name).Scan(&org); err != nil {
		t.Fatalf("insert org: %v", err)
	}
	if err := b.QueryRowContext(ctx, "INSERT INTO users (org_id, name, role) VALUES (?, ?, 'member') RETURNING id",
		org, "user-"+name).Scan(&user); err != nil {
		t.Fatalf("insert user: %v", err)
	}
	return org, user
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
