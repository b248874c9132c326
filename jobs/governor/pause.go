package governor

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// The roles a pause records of who set it.
const (
	// RoleOperator: an org's operator.
	RoleOperator = "operator"
	// RoleAdmin: an admin, or the command line.
	RoleAdmin = "admin"
	// RoleProvider: the provider's own answer (a 429's Retry-After, an exhausted limit).
	RoleProvider = "provider"
)

// Pauser is who sets an operator's pause, recorded with it.
type Pauser struct {
	// UserID is the user (nil for the command line).
	UserID *int64
	// Role is RoleOperator or RoleAdmin.
	Role string
	// Actor is the name the audit trail gives it ("user:ada", "cli").
	Actor string
}

// validPauseRole reports whether an operator's pause may record role.
func validPauseRole(role string) bool { return role == RoleOperator || role == RoleAdmin }

// Pause holds every call to model, for every process, until someone resumes it.
func (g *Governor) Pause(ctx context.Context, model string, by Pauser) error {
	return g.PauseIn(ctx, g.cfg.DB, model, by)
}

// PauseIn is Pause inside the caller's transaction (idb), so that an operator's pause and its
// audit row commit together.
func (g *Governor) PauseIn(ctx context.Context, idb bun.IDB, model string, by Pauser) error {
	if !validPauseRole(by.Role) {
		return fmt.Errorf("pause model %s: %w", model, errors.New("the pauser's role must be operator or admin"))
	}
	row := &ModelState{Model: model, OperatorPaused: true, PausedBy: by.UserID, PausedRole: by.Role, PausedActor: by.Actor}
	_, err := idb.NewInsert().Model(row).
		Column("model", "operator_paused", "paused_by", "paused_role", "paused_actor").
		On("CONFLICT (model) DO UPDATE").
		Set("operator_paused = true").
		Set("paused_by = EXCLUDED.paused_by").
		Set("paused_role = EXCLUDED.paused_role").
		Set("paused_actor = EXCLUDED.paused_actor").
		Set("updated_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("pause model %s: %w", model, err)
	}
	return nil
}

// Resume lets calls to model go again: it ends an operator's pause and a provider's alike,
// and the token debt past now that answers left, so the next reservation is granted at once
// where the configured limits allow it.
func (g *Governor) Resume(ctx context.Context, model string) error {
	return g.ResumeIn(ctx, g.cfg.DB, model)
}

// ResumeIn is Resume inside the caller's transaction (idb).
func (g *Governor) ResumeIn(ctx context.Context, idb bun.IDB, model string) error {
	if _, err := idb.NewRaw(resumeSQL, model).Exec(ctx); err != nil {
		return fmt.Errorf("resume model %s: %w", model, err)
	}
	return nil
}
