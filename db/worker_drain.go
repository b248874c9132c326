package db

import (
	"time"

	"github.com/uptrace/bun"
)

// WorkerDrain is a worker process that started a graceful stop: from StartedAt it claims
// nothing new and gives its running calls GraceMS milliseconds before it hands them back.
type WorkerDrain struct {
	bun.BaseModel `bun:"table:sa_worker_drain"`
	WorkerID      string     `bun:"worker_id,pk"`
	StartedAt     time.Time  `bun:"started_at,nullzero,default:now()"`
	GraceMS       int64      `bun:"grace_ms"`
	StoppedAt     *time.Time `bun:"stopped_at"`
}
