package jobs

import (
	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// KindPromptExecute is the deferred-operation kind of a prompt job.
const KindPromptExecute = "prompt.execute"

// OwnerPromptRuntime is the component that owns prompt jobs.
const OwnerPromptRuntime = "asterion.jobs"

// StatusDocOf builds the deferred-operation-status.v1 document of a registry row.
func StatusDocOf(op db.Operation) (deferred.StatusDoc, error) { return registry.StatusDocOf(op) }

// The registry's types as the service's callers name them.
type (
	// Owner is an owning runtime of deferred operations (registry.Owner).
	Owner = registry.Owner
	// Report is an owner's view of one operation (registry.Report).
	Report = registry.Report
	// ErrNotCancelable means the operation's owner cannot cancel it now.
	ErrNotCancelable = registry.ErrNotCancelable
	// Actor names who acts, for the audit trail.
	Actor = registry.Actor
	// PollerStats counts what the poller did, for /metrics.
	PollerStats = registry.PollerStats
)

// operationStatusOf maps a prompt job onto its operation's status: the one table of that
// mapping. A superseded job leaves the operation's terminal status alone.
//
//	queued → pending, running → running, succeeded → completed,
//	failed → timed-out when error_kind is stuck or timeout, else failed,
//	cancelled → expired when error_kind is expired, else cancelled.
func operationStatusOf(j db.Job, current string) string {
	switch State(j.State) {
	case StateQueued:
		return string(deferred.StatusPending)
	case StateRunning:
		return string(deferred.StatusRunning)
	case StateSucceeded:
		return string(deferred.StatusCompleted)
	case StateFailed:
		if k := deref(j.ErrorKind); k == KindStuck || k == "timeout" {
			return string(deferred.StatusTimedOut)
		}
		return string(deferred.StatusFailed)
	case StateCancelled:
		if deref(j.ErrorKind) == KindExpired {
			return string(deferred.StatusExpired)
		}
		return string(deferred.StatusCancelled)
	}
	return current
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
