package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
)

// Sentinel errors callers branch on.
var (
	// ErrUnauthenticated means no valid credential: the answer is 401 or the login page.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrNotFound means the named org or user does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists means a name is already taken.
	ErrExists = errors.New("already exists")
	// ErrInvalid means an input breaks a rule; the message says which.
	ErrInvalid = errors.New("invalid")
)

// SessionTTL is how long a browser session lasts.
const SessionTTL = 12 * time.Hour

// Service creates and checks identities against the database.
type Service struct {
	db  *bun.DB
	now func() time.Time
	cfg Config
	// hashSlots bounds the password hashes running at once in this process (one token each).
	hashSlots chan struct{}
	// dummyHash is the hash of dummyPassword at the configured cost, made at the first sign-in
	// that needs it (a command that signs nobody in never pays for it).
	dummyHash func() string
}

// NewService returns a Service over bunDB with the default Config.
func NewService(bunDB *bun.DB) *Service {
	s, err := New(bunDB, Config{})
	if err != nil {
		panic("identity: the default config is invalid: " + err.Error())
	}
	return s
}

// New returns a Service over bunDB with cfg, or the reason cfg is invalid.
func New(bunDB *bun.DB, cfg Config) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Service{db: bunDB, now: time.Now, cfg: cfg, hashSlots: make(chan struct{}, cfg.MaxConcurrentHashes)}
	s.dummyHash = sync.OnceValue(func() string {
		h, _ := cfg.PasswordCost.Hash(dummyPassword)
		return h
	})
	return s, nil
}

// Config returns the configuration in effect, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// CreateOrg creates an org with a unique name.
func (s *Service) CreateOrg(ctx context.Context, name string) (db.Org, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return db.Org{}, fmt.Errorf("%w: org name must be 1..100 characters", ErrInvalid)
	}
	org := db.Org{Name: name}
	if _, err := s.db.NewInsert().Model(&org).Returning("*").Exec(ctx); err != nil {
		if isUniqueViolation(err) {
			return db.Org{}, fmt.Errorf("org %q: %w", name, ErrExists)
		}
		return db.Org{}, fmt.Errorf("create org %q: %w", name, err)
	}
	return org, nil
}

// OrgByName finds an org.
func (s *Service) OrgByName(ctx context.Context, name string) (db.Org, error) {
	var org db.Org
	err := s.db.NewSelect().Model(&org).Where("name = ?", name).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return org, fmt.Errorf("org %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return org, fmt.Errorf("find org %q: %w", name, err)
	}
	return org, nil
}

// CreateUser creates a user in the named org. An empty password leaves the user unable to
// sign in to the pages (API tokens still work).
func (s *Service) CreateUser(ctx context.Context, orgName, name string, role Role, password string) (db.User, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 || strings.ContainsAny(name, " \t\r\n") {
		return db.User{}, fmt.Errorf("%w: user name must be 1..100 characters without spaces", ErrInvalid)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return db.User{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	org, err := s.OrgByName(ctx, orgName)
	if err != nil {
		return db.User{}, err
	}
	u := db.User{OrgID: org.ID, Name: name, Role: string(role)}
	if password != "" {
		if err := checkPassword(password); err != nil {
			return db.User{}, err
		}
		h, err := s.cfg.PasswordCost.Hash(password)
		if err != nil {
			return db.User{}, err
		}
		u.PasswordHash = &h
	}
	if _, err := s.db.NewInsert().Model(&u).Returning("*").Exec(ctx); err != nil {
		if isUniqueViolation(err) {
			return db.User{}, fmt.Errorf("user %q: %w", name, ErrExists)
		}
		return db.User{}, fmt.Errorf("create user %q: %w", name, err)
	}
	return u, nil
}

func scanPrincipal(row interface{ Scan(...any) error }) (Principal, error) {
	var p Principal
	var role string
	if err := row.Scan(&p.UserID, &p.UserName, &role, &p.OrgID, &p.OrgName); err != nil {
		return p, err
	}
	p.Role = Role(role)
	return p, nil
}

// SessionPrincipal returns the principal and CSRF token of a live session cookie, or
// ErrUnauthenticated for a session that is unknown, signed out, revoked or expired, or whose
// user is disabled. It is the one answer to "is this session still valid".
func (s *Service) SessionPrincipal(ctx context.Context, cookie string) (Principal, string, error) {
	if cookie == "" || len(cookie) > 200 {
		return Principal{}, "", ErrUnauthenticated
	}
	var csrf string
	row := s.db.DB.QueryRowContext(ctx, sessionPrincipalSQL, HashSecret(cookie))
	var p Principal
	var role string
	err := row.Scan(&p.UserID, &p.UserName, &role, &p.OrgID, &p.OrgName, &csrf)
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, "", ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, "", fmt.Errorf("load session: %w", err)
	}
	p.Role = Role(role)
	return p, csrf, nil
}

// Logout ends a session.
func (s *Service) Logout(ctx context.Context, cookie string) error {
	_, err := s.db.NewDelete().Model((*db.Session)(nil)).Where("id_hash = ?", HashSecret(cookie)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return nil
}

// Bootstrap creates org "default" and user "admin" on first start (no users at all). With an
// empty password it generates one and returns it so the caller can print it once.
func (s *Service) Bootstrap(ctx context.Context, adminPassword string) (generated string, created bool, err error) {
	n, err := s.db.NewSelect().Model((*db.User)(nil)).Count(ctx)
	if err != nil {
		return "", false, fmt.Errorf("count users: %w", err)
	}
	if n > 0 {
		return "", false, nil
	}
	if adminPassword == "" {
		generated = NewSecret("")[:24]
		adminPassword = generated
	}
	if _, err := s.OrgByName(ctx, "default"); errors.Is(err, ErrNotFound) {
		if _, err := s.CreateOrg(ctx, "default"); err != nil && !errors.Is(err, ErrExists) {
			return "", false, err
		}
	}
	if _, err := s.CreateUser(ctx, "default", "admin", RoleAdmin, adminPassword); err != nil {
		if errors.Is(err, ErrExists) { // another process bootstrapped at the same moment
			return "", false, nil
		}
		return "", false, err
	}
	return generated, true, nil
}

func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "23505")
}

// PrincipalByName returns the principal of a named user (for the command line).
func (s *Service) PrincipalByName(ctx context.Context, name string) (Principal, error) {
	p, err := scanPrincipal(s.db.DB.QueryRowContext(ctx, principalByNameSQL, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Principal{}, fmt.Errorf("find user %q: %w", name, err)
	}
	return p, nil
}
