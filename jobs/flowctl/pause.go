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
	"asterion/jobs/governor"
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

// SetOrgPaused pauses (or resumes) the work of org: its queued jobs wait until an operator
// resumes it. An admin may pause any org, an operator only its own; another org answers
// ErrNotFound, exactly like a missing one, and a member ErrForbidden. The pause records who
// set it, and only an equal or higher role changes it: an operator neither resumes nor
// re-pauses an org an admin paused (ErrPauseHeld, which is also ErrForbidden).
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
	role := roleOf(v)
	return c.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var id int64
		err := tx.Tx.QueryRowContext(ctx, setOrgPausedSQL, orgID, paused, a.UserID, role, a.Name, pauseRank(role)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			var exists bool
			if err := tx.Tx.QueryRowContext(ctx, orgExistsSQL, orgID).Scan(&exists); err != nil {
				return fmt.Errorf("set org %d paused=%v: %w", orgID, paused, err)
			}
			if exists {
				return fmt.Errorf("org %d: %w", orgID, ErrPauseHeld)
			}
			return fmt.Errorf("org %d: %w", orgID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("set org %d paused=%v: %w", orgID, paused, err)
		}
		return audit(ctx, tx, orgID, a, action, "org", strconv.FormatInt(orgID, 10), map[string]any{"paused": paused, "role": role})
	})
}

// SetModelPaused pauses (or resumes) every call to model, for every org and process. The
// provider account is shared by every org, so only an admin may (ErrForbidden otherwise). A
// resume ends the provider's pause as well as an operator's, and wakes at once the jobs that
// were waiting for the model (see wakeWaiters).
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
	role := roleOf(v)
	return c.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		detail := map[string]any{"paused": paused, "role": role}
		if paused {
			if err := c.cfg.Governor.PauseIn(ctx, tx, model, governor.Pauser{UserID: a.UserID, Role: role, Actor: a.Name}); err != nil {
				return err
			}
		} else {
			if err := c.cfg.Governor.ResumeIn(ctx, tx, model); err != nil {
				return err
			}
			woken, err := c.wakeWaiters(ctx, tx, model)
			if err != nil {
				return err
			}
			detail["woken"] = woken
		}
		// A model belongs to no org: the row goes to the acting admin's org.
		return audit(ctx, tx, v.OrgID, a, action, "model", model, detail)
	})
}

// roleOf is the role v acts in: an admin (every org; the command line too) or an operator.
func roleOf(v Viewer) string {
	if v.AllOrgs {
		return governor.RoleAdmin
	}
	return governor.RoleOperator
}

// mayChange reports whether v may change a pause set by role: only a role of at least its
// rank may (setOrgPausedSQL holds the same rule under the row's lock).
func mayChange(v Viewer, role string) bool { return pauseRank(roleOf(v)) >= pauseRank(role) }

// pauseRank orders the roles that may set a pause: a pause is changed only by a role of at
// least its rank. A pause recorded before roles were ranks lowest.
func pauseRank(role string) int {
	switch role {
	case governor.RoleAdmin:
		return 2
	case governor.RoleOperator:
		return 1
	}
	return 0
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
