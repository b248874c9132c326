package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"asterion/db"
)

// MaxTokenTTL is the longest lifetime a token may be given.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// TokenInfo describes an API token without its secret or its hash.
type TokenInfo struct {
	ID int64
	// Prefix is the token's first characters, enough to recognise it.
	Prefix    string
	CreatedAt time.Time
	// LastUsedAt is when it last authenticated a request, to the minute; nil when never.
	LastUsedAt *time.Time
	// ExpiresAt is nil for a token that does not expire.
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// CreateToken issues a new API token for the named user that does not expire, and returns it;
// only its hash is kept.
func (s *Service) CreateToken(ctx context.Context, userName string) (string, error) {
	secret, _, err := s.CreateTokenExpiring(ctx, userName, 0)
	return secret, err
}

// CreateTokenExpiring issues a new API token for the named user, valid for ttl (0: no expiry),
// and returns the secret (shown once) and what is stored of it.
func (s *Service) CreateTokenExpiring(ctx context.Context, userName string, ttl time.Duration) (string, TokenInfo, error) {
	if ttl < 0 || ttl > MaxTokenTTL {
		return "", TokenInfo{}, fmt.Errorf("%w: a token lives between 1 second and 10 years", ErrInvalid)
	}
	u, err := s.userByName(ctx, userName)
	if err != nil {
		return "", TokenInfo{}, err
	}
	secret := NewSecret(tokenPrefix)
	tok := db.APIToken{UserID: u.ID, TokenHash: HashSecret(secret), Prefix: secret[:len(tokenPrefix)+6]}
	if ttl > 0 {
		at := s.now().Add(ttl).UTC()
		tok.ExpiresAt = &at
	}
	if _, err := s.db.NewInsert().Model(&tok).Returning("*").Exec(ctx); err != nil {
		return "", TokenInfo{}, fmt.Errorf("store token for %q: %w", userName, err)
	}
	return secret, tokenInfo(tok), nil
}

// ListTokens returns every token of the named user, newest first, revoked and expired ones
// included.
func (s *Service) ListTokens(ctx context.Context, userName string) ([]TokenInfo, error) {
	u, err := s.userByName(ctx, userName)
	if err != nil {
		return nil, err
	}
	var toks []db.APIToken
	if err := s.db.NewSelect().Model(&toks).Where("user_id = ?", u.ID).Order("id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list tokens of %q: %w", userName, err)
	}
	out := make([]TokenInfo, len(toks))
	for i, t := range toks {
		out[i] = tokenInfo(t)
	}
	return out, nil
}

func tokenInfo(t db.APIToken) TokenInfo {
	return TokenInfo{ID: t.ID, Prefix: t.Prefix, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// RevokeToken makes a token, given by its secret, unusable from now on.
func (s *Service) RevokeToken(ctx context.Context, secret string) error {
	res, err := s.db.NewUpdate().Model((*db.APIToken)(nil)).Set("revoked_at = now()").
		Where("token_hash = ? AND revoked_at IS NULL", HashSecret(secret)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token: %w", ErrNotFound)
	}
	return nil
}

// RevokeTokenID makes the token with that id unusable from now on. It reports false when the
// token was already revoked (nothing changed) and ErrNotFound when there is no such token.
func (s *Service) RevokeTokenID(ctx context.Context, id int64) (bool, error) {
	res, err := s.db.NewUpdate().Model((*db.APIToken)(nil)).Set("revoked_at = now()").
		Where("id = ? AND revoked_at IS NULL", id).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("revoke token %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	exists, err := s.db.NewSelect().Model((*db.APIToken)(nil)).Where("id = ?", id).Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("find token %d: %w", id, err)
	}
	if !exists {
		return false, fmt.Errorf("token %d: %w", id, ErrNotFound)
	}
	return false, nil
}

// AuthenticateToken returns the principal of a live bearer token, or ErrUnauthenticated for a
// token that is unknown, revoked or expired, or whose user is disabled. It is the one answer to
// "is this token still valid", checked on every request. It records the use to the minute:
// at most one write per token per minute, whatever the request rate.
func (s *Service) AuthenticateToken(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, tokenPrefix) || len(secret) > 200 {
		return Principal{}, ErrUnauthenticated
	}
	// Every API request runs this: through database/sql with a parameter, the connection
	// keeps it prepared (see db.Open), and PostgreSQL plans the join once.
	hash := HashSecret(secret)
	var p Principal
	var role string
	var stale bool
	err := s.db.DB.QueryRowContext(ctx, tokenAuthSQL, hash).Scan(&p.UserID, &p.UserName, &role, &p.OrgID, &p.OrgName, &stale)
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate token: %w", err)
	}
	p.Role = Role(role)
	if stale {
		if _, err := s.db.DB.ExecContext(ctx, tokenUsedSQL, hash); err != nil {
			return Principal{}, fmt.Errorf("record token use: %w", err)
		}
	}
	return p, nil
}
