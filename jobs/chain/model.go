package chain

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/deferred"
)

// Chain constants.
const (
	// Kind is the deferred-operation kind of a chain.
	Kind = "flow.chain"
	// OwnerName is the component that owns chains and their continuations.
	OwnerName = "asterion.chain"
	// MaxSteps bounds the steps of one chain.
	MaxSteps = 20
	// ModeSuspend suspends the chain on each step's deferred operation (the default).
	ModeSuspend = "suspend"
	// ModeReject fails the chain instead of suspending.
	ModeReject = "reject-as-failure"
	// maxTTLSeconds bounds ttl_seconds before the policy clamps it (one week).
	maxTTLSeconds = 7 * 24 * 3600
)

// Chain states.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
	Expired   = "expired"
)

// Chain is a row of sa_chain.
type Chain struct {
	bun.BaseModel  `bun:"table:sa_chain"`
	ID             uuid.UUID       `bun:"id,pk,type:uuid"`
	OperationID    uuid.UUID       `bun:"operation_id,type:uuid"`
	OrgID          int64           `bun:"org_id"`
	CreatedBy      int64           `bun:"created_by"`
	State          string          `bun:"state"`
	Mode           string          `bun:"deferred_response_mode"`
	Priority       int             `bun:"priority"`
	StepCount      int             `bun:"step_count"`
	CurrentStep    int             `bun:"current_step"`
	IdempotencyKey *string         `bun:"idempotency_key"`
	RequestHash    string          `bun:"request_hash"`
	Result         json.RawMessage `bun:"result,type:jsonb,nullzero"`
	Diagnostic     json.RawMessage `bun:"diagnostic,type:jsonb,nullzero"`
	CreatedAt      time.Time       `bun:"created_at,nullzero,default:now()"`
	UpdatedAt      time.Time       `bun:"updated_at,nullzero,default:now()"`
	FinishedAt     *time.Time      `bun:"finished_at"`
}

// StepRow is a row of sa_chain_step: a step's state and ids, never its text.
type StepRow struct {
	bun.BaseModel   `bun:"table:sa_chain_step"`
	ChainID         uuid.UUID  `bun:"chain_id,pk,type:uuid"`
	Step            int        `bun:"step,pk"`
	IncludePrevious bool       `bun:"include_previous"`
	State           string     `bun:"state"`
	PromptID        *uuid.UUID `bun:"prompt_id,type:uuid"`
	JobID           *uuid.UUID `bun:"job_id,type:uuid"`
	OperationID     *uuid.UUID `bun:"operation_id,type:uuid"`
	ResponseID      *uuid.UUID `bun:"response_id,type:uuid"`
	UpdatedAt       time.Time  `bun:"updated_at,nullzero,default:now()"`
}

// Diagnostic explains why a chain failed; it is stored on sa_chain and its digest on the
// registry row.
type Diagnostic struct {
	ChainID   uuid.UUID  `json:"chain_id"`
	Step      int        `json:"step"`
	StepCount int        `json:"step_count"`
	Operation *uuid.UUID `json:"operation_id,omitempty"`
	// Status is the terminal status of the step's operation, or "rejected" for a chain that
	// asked for reject-as-failure.
	Status    string `json:"status"`
	ErrorKind string `json:"error_kind,omitempty"`
	Message   string `json:"message"`
}

// continuation is the host-owned state of a suspended chain. It is written only to
// sa_operation_continuation and read only by resume.
type continuation struct {
	V         int         `json:"v"`
	ChainID   uuid.UUID   `json:"chain_id"`
	Step      int         `json:"step"`
	Steps     []contStep  `json:"steps"`
	Responses []uuid.UUID `json:"responses"`
}

type contStep struct {
	Prompt          string `json:"prompt"`
	IncludePrevious bool   `json:"include_previous"`
}

func (c continuation) encode() ([]byte, error) { return deferred.CanonicalJSON(c) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
