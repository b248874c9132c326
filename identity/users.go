package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"asterion/db"
)

func (s *Service) userByName(ctx context.Context, name string) (db.User, error) {
	var u db.User
	err := s.db.NewSelect().Model(&u).Where("name = ?", name).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return u, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return u, fmt.Errorf("find user %q: %w", name, err)
	}
	return u, nil
}

// DisableUser stops the named user from acting at once: its tokens and sessions answer as
// unauthenticated, and its sessions are deleted. It returns how many sessions ended. Disabling
// a disabled user changes nothing and is not an error.
func (s *Service) DisableUser(ctx context.Context, name string) (int, error) {
	var ended int
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var id int64
		err := tx.NewUpdate().Model((*db.User)(nil)).Set("disabled_at = coalesce(disabled_at, now())").
			Where("name = ?", name).Returning("id").Scan(ctx, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("user %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("disable user %q: %w", name, err)
		}
		ended, err = deleteSessions(ctx, tx, id)
		return err
	})
	return ended, err
}

// EnableUser lets a disabled user act again; its unrevoked, unexpired tokens work again.
func (s *Service) EnableUser(ctx context.Context, name string) error {
	res, err := s.db.NewUpdate().Model((*db.User)(nil)).Set("disabled_at = NULL").Where("name = ?", name).Exec(ctx)
	if err != nil {
		return fmt.Errorf("enable user %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	return nil
}

// SetPassword replaces the named user's password and ends every session of that user (a
// password is reset because someone else may know the old one). It returns how many sessions
// ended.
func (s *Service) SetPassword(ctx context.Context, name, password string) (int, error) {
	if err := checkPassword(password); err != nil {
		return 0, err
	}
	h, err := s.cfg.PasswordCost.Hash(password)
	if err != nil {
		return 0, err
	}
	var ended int
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var id int64
		err := tx.NewUpdate().Model((*db.User)(nil)).Set("password_hash = ?", h).
			Where("name = ?", name).Returning("id").Scan(ctx, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("user %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("set password of %q: %w", name, err)
		}
		ended, err = deleteSessions(ctx, tx, id)
		return err
	})
	return ended, err
}

// RevokeSessions signs the named user out of every browser and returns how many sessions ended.
func (s *Service) RevokeSessions(ctx context.Context, name string) (int, error) {
	u, err := s.userByName(ctx, name)
	if err != nil {
		return 0, err
	}
	return deleteSessions(ctx, s.db, u.ID)
}

func deleteSessions(ctx context.Context, q bun.IDB, userID int64) (int, error) {
	res, err := q.NewDelete().Model((*db.Session)(nil)).Where("user_id = ?", userID).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("end sessions of user %d: %w", userID, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// checkPassword is the rule every new password must meet.
func checkPassword(password string) error {
	if len(password) < 8 {
		return fmt.Errorf("%w: password must be at least 8 characters", ErrInvalid)
	}
	if len(password) > MaxPasswordLen {
		return fmt.Errorf("%w: password must be at most %d bytes", ErrInvalid, MaxPasswordLen)
	}
	return nil
}

// MaxPasswordLen is the longest password accepted, at creation and at sign-in.
const MaxPasswordLen = 1024
