package db

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Org is a tenant: nothing of one org is visible to another.
type Org struct {
	bun.BaseModel `bun:"table:orgs"`
	ID            int64     `bun:"id,pk,autoincrement"`
	Name          string    `bun:"name"`
	WebhookURL    *string   `bun:"webhook_url"`
	WebhookSecret *string   `bun:"webhook_secret"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
}

// User is a person or script acting inside one org with one role.
type User struct {
	bun.BaseModel `bun:"table:users"`
	ID            int64      `bun:"id,pk,autoincrement"`
	OrgID         int64      `bun:"org_id"`
	Name          string     `bun:"name"`
	Role          string     `bun:"role"`
	PasswordHash  *string    `bun:"password_hash"`
	CreatedAt     time.Time  `bun:"created_at,nullzero,default:now()"`
	DisabledAt    *time.Time `bun:"disabled_at"`
}

// APIToken is a bearer token, stored only as a hash.
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`
	ID            int64      `bun:"id,pk,autoincrement"`
	UserID        int64      `bun:"user_id"`
	TokenHash     string     `bun:"token_hash"`
	Prefix        string     `bun:"prefix"`
	CreatedAt     time.Time  `bun:"created_at,nullzero,default:now()"`
	LastUsedAt    *time.Time `bun:"last_used_at"`
	RevokedAt     *time.Time `bun:"revoked_at"`
}

// Session is a signed-in browser, keyed by the hash of its cookie value.
type Session struct {
	bun.BaseModel `bun:"table:sessions"`
	IDHash        string    `bun:"id_hash,pk"`
	UserID        int64     `bun:"user_id"`
	CSRFToken     string    `bun:"csrf_token"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
	ExpiresAt     time.Time `bun:"expires_at"`
}

// Entity is a prompt or a response: durable authored knowledge.
type Entity struct {
	bun.BaseModel `bun:"table:sa_entity"`
	ID            uuid.UUID       `bun:"id,pk,type:uuid"`
	Kind          string          `bun:"kind"`
	Body          string          `bun:"body"`
	CorrelationID uuid.UUID       `bun:"correlation_id,type:uuid"`
	ParentID      *uuid.UUID      `bun:"parent_id,type:uuid"`
	CausationID   *uuid.UUID      `bun:"causation_id,type:uuid"`
	SourceRefs    json.RawMessage `bun:"source_refs,type:jsonb,nullzero,default:'[]'"`
	TruthClass    string          `bun:"truth_class"`
	StateClass    string          `bun:"state_class"`
	OrgID         int64           `bun:"org_id"`
	CreatedBy     int64           `bun:"created_by"`
	CreatedAt     time.Time       `bun:"created_at,nullzero,default:now()"`
	UpdatedAt     time.Time       `bun:"updated_at,nullzero,default:now()"`
}

// Job is one execution of a prompt (sa_job): the truth about what the executor is doing.
type Job struct {
	bun.BaseModel      `bun:"table:sa_job"`
	ID                 uuid.UUID       `bun:"id,pk,type:uuid"`
	PromptID           uuid.UUID       `bun:"prompt_id,type:uuid"`
	State              string          `bun:"state"`
	Priority           int             `bun:"priority"`
	Attempt            int             `bun:"attempt"`
	MaxAttempts        int             `bun:"max_attempts"`
	ExecutionOptions   json.RawMessage `bun:"execution_options,type:jsonb"`
	WorkerClaim        *string         `bun:"worker_claim"`
	ClaimedAt          *time.Time      `bun:"claimed_at"`
	StartedAt          *time.Time      `bun:"started_at"`
	RunningHeartbeatAt *time.Time      `bun:"running_heartbeat_at"`
	FinishedAt         *time.Time      `bun:"finished_at"`
	ResponseID         *uuid.UUID      `bun:"response_id,type:uuid"`
	ErrorKind          *string         `bun:"error_kind"`
	ErrorMessage       *string         `bun:"error_message"`
	Supersedes         *uuid.UUID      `bun:"supersedes,type:uuid"`
	OrgID              int64           `bun:"org_id"`
	CreatedBy          int64           `bun:"created_by"`
	CreatedAt          time.Time       `bun:"created_at,nullzero,default:now()"`
	UpdatedAt          time.Time       `bun:"updated_at,nullzero,default:now()"`
	RiverJobID         *int64          `bun:"river_job_id"`
	ScheduledAt        time.Time       `bun:"scheduled_at,nullzero,default:now()"`
	OperationID        *uuid.UUID      `bun:"operation_id,type:uuid"`
}

// Edge links two entities; a response flows from its prompt.
type Edge struct {
	bun.BaseModel `bun:"table:sa_edge"`
	ID            int64     `bun:"id,pk,autoincrement"`
	Kind          string    `bun:"kind"`
	FromID        uuid.UUID `bun:"from_id,type:uuid"`
	ToID          uuid.UUID `bun:"to_id,type:uuid"`
	OrgID         int64     `bun:"org_id"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
}

// LedgerEntry records the cost side of one successful provider call.
type LedgerEntry struct {
	bun.BaseModel    `bun:"table:sa_ledger"`
	ID               int64     `bun:"id,pk,autoincrement"`
	JobID            uuid.UUID `bun:"job_id,type:uuid"`
	PromptID         uuid.UUID `bun:"prompt_id,type:uuid"`
	ResponseID       uuid.UUID `bun:"response_id,type:uuid"`
	OrgID            int64     `bun:"org_id"`
	Provider         string    `bun:"provider"`
	Model            string    `bun:"model"`
	RequestID        string    `bun:"request_id"`
	PromptTokens     int       `bun:"prompt_tokens"`
	CompletionTokens int       `bun:"completion_tokens"`
	DurationMS       int64     `bun:"duration_ms"`
	CreatedAt        time.Time `bun:"created_at,nullzero,default:now()"`
}

// AuditEntry is one structural audit record: who did what to which subject.
type AuditEntry struct {
	bun.BaseModel `bun:"table:sa_audit"`
	ID            int64           `bun:"id,pk,autoincrement"`
	OrgID         int64           `bun:"org_id"`
	ActorID       *int64          `bun:"actor_id"`
	Actor         string          `bun:"actor"`
	Action        string          `bun:"action"`
	SubjectType   string          `bun:"subject_type"`
	SubjectID     string          `bun:"subject_id"`
	Detail        json.RawMessage `bun:"detail,type:jsonb,nullzero,default:'{}'"`
	CreatedAt     time.Time       `bun:"created_at,nullzero,default:now()"`
}

// Event is one change-feed row; Seq is set by the sequencer after commit.
type Event struct {
	bun.BaseModel `bun:"table:sa_event"`
	ID            int64           `bun:"id,pk,autoincrement"`
	Seq           *int64          `bun:"seq"`
	Topic         string          `bun:"topic"`
	OrgID         int64           `bun:"org_id"`
	UserID        int64           `bun:"user_id"`
	PromptID      *uuid.UUID      `bun:"prompt_id,type:uuid"`
	JobID         *uuid.UUID      `bun:"job_id,type:uuid"`
	OperationID   *uuid.UUID      `bun:"operation_id,type:uuid"`
	Payload       json.RawMessage `bun:"payload,type:jsonb"`
	CreatedAt     time.Time       `bun:"created_at,nullzero,default:now()"`
}

// Operation is a deferred-operation registry row: the host read model of long work.
type Operation struct {
	bun.BaseModel           `bun:"table:sa_operation"`
	ID                      uuid.UUID       `bun:"id,pk,type:uuid"`
	Kind                    string          `bun:"kind"`
	Owner                   string          `bun:"owner"`
	Status                  string          `bun:"status"`
	OrgID                   int64           `bun:"org_id"`
	CreatedBy               int64           `bun:"created_by"`
	Subject                 json.RawMessage `bun:"subject,type:jsonb"`
	CorrelationID           uuid.UUID       `bun:"correlation_id,type:uuid"`
	AcceptedAt              time.Time       `bun:"accepted_at,nullzero,default:now()"`
	ExpiresAt               time.Time       `bun:"expires_at"`
	RetryAfterSeconds       int             `bun:"retry_after_seconds"`
	CancelUnavailableReason *string         `bun:"cancel_unavailable_reason"`
	ContinuationDigest      *string         `bun:"continuation_digest"`
	DiagnosticsDigest       *string         `bun:"diagnostics_digest"`
	Result                  json.RawMessage `bun:"result,type:jsonb,nullzero"`
	LastErrorKind           *string         `bun:"last_error_kind"`
	LastErrorMessage        *string         `bun:"last_error_message"`
	SuccessorID             *uuid.UUID      `bun:"successor_id,type:uuid"`
	NextPollAt              time.Time       `bun:"next_poll_at,nullzero,default:now()"`
	PollCount               int             `bun:"poll_count"`
	TerminalAt              *time.Time      `bun:"terminal_at"`
	UpdatedAt               time.Time       `bun:"updated_at,nullzero,default:now()"`
	// HistorySeq, HistoryDigest and HistoryAt are the head of the status history: the seq,
	// entry digest and time of its last entry (0 and nil before the first).
	HistorySeq    int64      `bun:"history_seq"`
	HistoryDigest *string    `bun:"history_digest"`
	HistoryAt     *time.Time `bun:"history_at"`

	// TxNow is read only by the registry's lock (registry.LockOperation), in the same round
	// trip: the clock of the transaction that locked the row.
	TxNow time.Time `bun:"tx_now,scanonly"`
}

// OperationHistory is one digest-chained entry of an operation's status history.
type OperationHistory struct {
	bun.BaseModel `bun:"table:sa_operation_history"`
	ID            int64     `bun:"id,pk,autoincrement"`
	OperationID   uuid.UUID `bun:"operation_id,type:uuid"`
	Seq           int64     `bun:"seq"`
	Status        string    `bun:"status"`
	At            time.Time `bun:"at"`
	DocDigest     string    `bun:"doc_digest"`
	PrevDigest    string    `bun:"prev_digest"`
	EntryDigest   string    `bun:"entry_digest"`
}
