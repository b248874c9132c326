package jobs

import (
	"context"

	"github.com/google/uuid"

	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Operations is the registry's API as the server reaches it through the service (which
// embeds it): status, poll-now and cancel of a visible operation, its history, the poller's
// counters, owner registration.
type Operations struct{ reg *registry.Registry }

// RegisterOwner adds the owner of another operation kind to the service's registry.
func (s *Operations) RegisterOwner(o Owner) { s.reg.Register(o) }

// History returns an operation's status history, oldest first.
func (s *Operations) History(ctx context.Context, id uuid.UUID) ([]deferred.HistoryEntry, error) {
	return s.reg.History(ctx, id)
}

// StatusAndSuccessor returns the status document of a visible operation and the id of the
// operation that superseded it, if any, from one read.
func (s *Operations) StatusAndSuccessor(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, *uuid.UUID, error) {
	return s.reg.StatusAndSuccessor(ctx, v, id)
}

// OperationStatus returns the status document of a visible operation.
func (s *Operations) OperationStatus(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	return s.reg.OperationStatus(ctx, v, id)
}

// Stats returns the poller's counters.
func (s *Operations) Stats() *PollerStats { return s.reg.Stats() }

// PollOperation polls the owning runtime now and returns the resulting status document.
func (s *Operations) PollOperation(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	return s.reg.PollOperation(ctx, v, id)
}

// CancelOperation cancels through the owner; a terminal operation is ErrConflict and a
// non-cancelable one *ErrNotCancelable with its reason.
func (s *Operations) CancelOperation(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (deferred.StatusDoc, error) {
	return s.reg.CancelOperation(ctx, v, id, actor)
}

// PollDue polls every due, non-terminal operation once through its owner.
func (s *Operations) PollDue(ctx context.Context) (int, error) { return s.reg.PollDue(ctx) }
