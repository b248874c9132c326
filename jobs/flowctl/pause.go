package flowctl

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"asterion/db"
)

// maxModelName bounds a model name an operator may pause.
const maxModelName = 200

// The audit actions of operators' pauses.
const (
	ActionOrgPaused    = "org.paused"
	ActionOrgResumed   = "org.resumed"
	ActionModelPaused  = "model.paused"
	ActionModelResumed = "model.resumed"
)

// setOrgPausedSQL upserts an org's pause flag, for an org that exists; no row back means no
// such org. The weight of a new row is the default.
const setOrgPausedSQL = `INSERT INTO sa_org_share (org_id, paused)
SELECT id, $2 FROM orgs WHERE id = $1
ON CONFLICT (org_id) DO UPDATE SET paused = EXCLUDED.paused, updated_at = now()
RETURNING org_id`

// SetOrgPaused pauses (or resumes) the work of org: its queued jobs wait until an operator
// resumes it. An admin may pause any org, an operator only its own; another org answers
// ErrNotFound, exactly like a missing one, and a member ErrForbidden.
func (c *Control) SetOrgPaused(ctx context.Context, v Viewer, a Actor, orgID int64, paused bool) error {
	if !v.AllOrgs && !v.OrgWide {
		return fmt.Errorf("pause org %d: %w", orgID, ErrForbidden)
	}
	if !v.AllOrgs && orgID != v.OrgID {
		return fmt.Errorf("org %d: %w", orgID, ErrNotFound)
	}
	action := ActionOrgResumed
	if paused {
		action = ActionOrgPaused
	}
	return c.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var id int64
		err := tx.Tx.QueryRowContext(ctx, setOrgPausedSQL, orgID, paused).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("org %d: %w", orgID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("set org %d paused=%v: %w", orgID, paused, err)
		}
		return audit(ctx, tx, orgID, a, action, "org", strconv.FormatInt(orgID, 10), map[string]any{"paused": paused})
	})
}

// SetModelPaused pauses (or resumes) every call to model, for every org and process. The
// provider account is shared by every org, so only an admin may (ErrForbidden otherwise).
func (c *Control) SetModelPaused(ctx context.Context, v Viewer, a Actor, model string, paused bool) error {
	if !v.AllOrgs {
		return fmt.Errorf("pause model %q: %w", model, ErrForbidden)
	}
	if !validModel(model) {
		return fmt.Errorf("pause model %q: %w", model, ErrInvalid)
	}
	action := ActionModelResumed
	if paused {
		action = ActionModelPaused
	}
	return c.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := c.cfg.Governor.SetPausedIn(ctx, tx, model, paused); err != nil {
			return err
		}
		// A model belongs to no org: the row goes to the acting admin's org.
		return audit(ctx, tx, v.OrgID, a, action, "model", model, map[string]any{"paused": paused})
	})
}

// validModel accepts a model name an operator may name: printable, not blank, bounded.
func validModel(m string) bool {
	if m == "" || len(m) > maxModelName || !utf8.ValidString(m) {
		return false
	}
	for _, r := range m {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// audit writes one audit row inside tx.
func audit(ctx context.Context, tx bun.Tx, orgID int64, a Actor, action, subjectType, subjectID string, detail any) error {
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("audit %s on %s %s: %w", action, subjectType, subjectID, err)
	}
	row := db.AuditEntry{OrgID: orgID, ActorID: a.UserID, Actor: a.Name, Action: action, SubjectType: subjectType,
		SubjectID: subjectID, Detail: raw}
	if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
		return fmt.Errorf("audit %s on %s %s: %w", action, subjectType, subjectID, err)
	}
	return nil
}
