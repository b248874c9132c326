package delivery

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Delivery constants.
const (
	// Kind is the deferred-operation kind of a webhook delivery.
	Kind = "artifact.delivery"
	// OwnerName is the component that owns deliveries.
	OwnerName = "asterion.delivery"
	// Queue is the River queue of delivery jobs.
	Queue = "deliveries"
	// Schema names the body of a delivery request.
	Schema = "asterion.delivery.v1"
	// InFlightReason is the cancel/unavailable-reason while a request is in flight.
	InFlightReason = "the delivery request is in flight"
	// Headers of a delivery request: Standard Webhooks' three, and the attempt number.
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderAttempt   = "X-Asterion-Attempt"
)

// Ledger states of a delivery.
const (
	Accepted  = "accepted"
	InFlight  = "in_flight"
	Retryable = "retryable"
	Delivered = "delivered"
	Failed    = "failed"
	Cancelled = "cancelled"
	Expired   = "expired"
)

// Delivery is a row of the delivery ledger (sa_delivery).
type Delivery struct {
	bun.BaseModel  `bun:"table:sa_delivery"`
	ID             uuid.UUID  `bun:"id,pk,type:uuid"`
	OperationID    uuid.UUID  `bun:"operation_id,type:uuid"`
	OrgID          int64      `bun:"org_id"`
	CreatedBy      int64      `bun:"created_by"`
	PromptID       uuid.UUID  `bun:"prompt_id,type:uuid"`
	JobID          uuid.UUID  `bun:"job_id,type:uuid"`
	ResponseID     uuid.UUID  `bun:"response_id,type:uuid"`
	URL            string     `bun:"url"`
	State          string     `bun:"state"`
	Attempts       int        `bun:"attempts"`
	MaxAttempts    int        `bun:"max_attempts"`
	NextAttemptAt  time.Time  `bun:"next_attempt_at,nullzero,default:now()"`
	InFlightSince  *time.Time `bun:"in_flight_since"`
	InFlightToken  *string    `bun:"in_flight_token"`
	LastStatusCode *int       `bun:"last_status_code"`
	LastError      *string    `bun:"last_error"`
	ErrorKind      *string    `bun:"error_kind"`
	RiverJobID     *int64     `bun:"river_job_id"`
	CreatedAt      time.Time  `bun:"created_at,nullzero,default:now()"`
	UpdatedAt      time.Time  `bun:"updated_at,nullzero,default:now()"`
	FinishedAt     *time.Time `bun:"finished_at"`
}

// Attempt is one HTTP attempt of a delivery (sa_delivery_attempt).
type Attempt struct {
	bun.BaseModel `bun:"table:sa_delivery_attempt"`
	ID            int64      `bun:"id,pk,autoincrement"`
	DeliveryID    uuid.UUID  `bun:"delivery_id,type:uuid"`
	Attempt       int        `bun:"attempt"`
	StartedAt     time.Time  `bun:"started_at,nullzero,default:now()"`
	FinishedAt    *time.Time `bun:"finished_at"`
	StatusCode    *int       `bun:"status_code"`
	Error         *string    `bun:"error"`
	Outcome       *string    `bun:"outcome"`
}

// Detail is a delivery with its attempts, oldest first.
type Detail struct {
	Delivery Delivery
	Attempts []Attempt
}
