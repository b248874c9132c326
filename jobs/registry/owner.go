package registry

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
)

// ErrorKindExpired is the error kind of work the registry expired.
const ErrorKindExpired = "expired"

// Actor names who acts, for the audit trail.
type Actor struct {
	UserID *int64
	Name   string
}

// Owner is an owning runtime of deferred operations: it reports the status of its work,
// cancels it or says why it cannot, and consumes a terminal result. The registry is the
// operator-visible join point; the owner stays the source of truth.
type Owner interface {
	// Kind is the operation kind this owner registers.
	Kind() string
	// Report returns the operation's status as the owner sees it now, with any error detail
	// and the result of a completed operation. An owner that no longer knows the operation
	// reports unknown.
	Report(ctx context.Context, tx bun.Tx, op db.Operation) (Report, error)
	// Cancel stops the work (errorKind "expired" when the registry expires it), or returns
	// *ErrNotCancelable.
	Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor Actor) error
	// Consume is called once, in the transaction that records a terminal status.
	Consume(ctx context.Context, tx bun.Tx, op db.Operation) error
}

// Mirroring is implemented by owners that write every status change of their work onto the
// registry row in the transaction that makes it; the poller then visits their operations only
// at their expiry, the one change of status it can find.
type Mirroring interface{ MirrorsStatus() bool }

// Resumer is implemented by owners that keep continuations (Suspend): when the operation a
// continuation waits on settles, the registry takes the continuation and hands it to the
// Resumer registered under the owner name it was stored with, in the settling transaction.
type Resumer interface {
	// Resume continues the work suspended on awaited, which has just become terminal; data is
	// the continuation as it was stored.
	Resume(ctx context.Context, tx bun.Tx, awaited db.Operation, data []byte) error
}

// Report is an owner's view of one operation.
type Report struct {
	Status       deferred.Status
	ErrorKind    string
	ErrorMessage string
	Result       json.RawMessage
	// CancelUnavailable, when non-empty, says why the work cannot be cancelled now.
	CancelUnavailable string
}

// Register adds the owner of an operation kind, replacing any earlier owner of that kind.
func (r *Registry) Register(o Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners[o.Kind()] = o
}

// RegisterResumer adds the Resumer of the continuations stored under owner.
func (r *Registry) RegisterResumer(owner string, res Resumer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumers[owner] = res
}

// Kinds returns the registered operation kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.owners))
	for k := range r.owners {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *Registry) ownerOf(kind string) (Owner, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	o, ok := r.owners[kind]
	return o, ok
}

func (r *Registry) resumerOf(owner string) (Resumer, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.resumers[owner]
	return res, ok
}
