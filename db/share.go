package db

import (
	"time"

	"github.com/uptrace/bun"
)

// OrgShare is an org's weight in the fair share of running slots, and whether an operator
// paused its work.
type OrgShare struct {
	bun.BaseModel `bun:"table:sa_org_share"`
	OrgID         int64     `bun:"org_id,pk"`
	Weight        int       `bun:"weight"`
	Paused        bool      `bun:"paused"`
	UpdatedAt     time.Time `bun:"updated_at,nullzero,default:now()"`
}
