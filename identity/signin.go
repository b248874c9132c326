package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
)

// Failed sign-ins are counted in PostgreSQL (table login_failures), not in memory: every server
// process sharing the database must refuse the same guesser, a restart must not reset the
// count, and the advisory locks below make "check, then count" atomic across processes. The
// rows are few (at most the limit per name and per address inside the window, since refused
// attempts are not stored) and are pruned by Purge.

// ErrSignInBusy means every password-hash slot of this process stayed taken for the configured
// wait: the answer is 503 with Retry-After, and the attempt does not count as a failure.
var ErrSignInBusy = errors.New("too many sign-ins are being checked at once")

// SignInBusyRetryAfter is what a busy answer tells the client to wait.
const SignInBusyRetryAfter = time.Second

// SignInLimitError refuses a sign-in because too many failed for its user name or its address
// inside the window. No password was checked.
type SignInLimitError struct {
	// RetryAt is when the refusal ends if no further failure is recorded.
	RetryAt time.Time
	// Now is the database's clock when the refusal was decided, for computing a Retry-After.
	Now time.Time
}

func (e *SignInLimitError) Error() string {
	return fmt.Sprintf("too many failed sign-ins; try again after %s", e.RetryAt.UTC().Format(time.RFC3339))
}

// RetryAfter is how long until RetryAt, rounded up to whole seconds (at least one).
func (e *SignInLimitError) RetryAfter() time.Duration {
	d := e.RetryAt.Sub(e.Now)
	secs := (d + time.Second - 1) / time.Second
	if secs < 1 {
		secs = 1
	}
	return secs * time.Second
}

// Lock classes of the two-key pg_advisory_xact_lock (a key space of its own, apart from the
// one-key locks): one per user name, one per address.
const (
	lockClassSignInUser    = 0x61737501
	lockClassSignInAddress = 0x61737502
)

// maxKeyLen bounds what an attempt stores of a user name or an address.
const maxKeyLen = 200

// SignIn checks a name and password from a client address and opens a session. It returns the
// cookie value (shown once), the session and its principal. A wrong name and a wrong password
// fail alike (ErrUnauthenticated), in about the same time.
//
// Before any password is checked the attempt is counted as a failure in advance, under locks
// on its name and its address, unless the window already holds the limit for the name at that
// address, for the address or for the name (Config's three limits): then the
// answer is a *SignInLimitError at once, so a flood costs one indexed query per attempt and
// never the hash. A sign-in that succeeds (or never ran its hash) takes its count back. At most
// Config.MaxConcurrentHashes hashes run at once; an attempt that waits longer than
// Config.HashWait for a slot gets ErrSignInBusy.
func (s *Service) SignIn(ctx context.Context, name, password, address string) (string, db.Session, Principal, error) {
	name, address = capKey(name), addressKey(address)
	attempt, err := s.reserveAttempt(ctx, name, address)
	if err != nil {
		return "", db.Session{}, Principal{}, err
	}
	release := false // true when the attempt turns out not to be a failed sign-in
	defer func() {
		if release {
			s.releaseAttempt(context.WithoutCancel(ctx), attempt)
		}
	}()

	var u db.User
	err = s.db.NewSelect().Model(&u).Where("name = ? AND disabled_at IS NULL", name).Scan(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		release = true // the database failed, not the caller
		return "", db.Session{}, Principal{}, fmt.Errorf("sign in: %w", err)
	}
	hash := s.dummyHash()
	if err == nil && u.PasswordHash != nil {
		hash = *u.PasswordHash
	}
	match, verr := s.verifyLimited(ctx, password, hash)
	if errors.Is(verr, ErrSignInBusy) || (ctx.Err() != nil && errors.Is(verr, ctx.Err())) {
		release = true
		return "", db.Session{}, Principal{}, verr
	}
	if err != nil || u.PasswordHash == nil || verr != nil || !match {
		return "", db.Session{}, Principal{}, ErrUnauthenticated
	}
	release = true
	cookie := NewSecret("")
	sess := db.Session{IDHash: HashSecret(cookie), UserID: u.ID, CSRFToken: NewSecret(""), ExpiresAt: s.now().Add(SessionTTL)}
	if _, err := s.db.NewInsert().Model(&sess).Exec(ctx); err != nil {
		return "", db.Session{}, Principal{}, fmt.Errorf("create session: %w", err)
	}
	p, err := scanPrincipal(s.db.DB.QueryRowContext(ctx, principalByIDSQL, u.ID))
	if err != nil {
		return "", db.Session{}, Principal{}, fmt.Errorf("load principal: %w", err)
	}
	return cookie, sess, p, nil
}

// Login is SignIn from an unnamed address (callers without a client address, such as tests).
func (s *Service) Login(ctx context.Context, name, password string) (string, db.Session, Principal, error) {
	return s.SignIn(ctx, name, password, "")
}

// refusal reads whether the name at the address, the address or the name is over its limit,
// on q (the pool or a transaction).
func (s *Service) refusal(ctx context.Context, q bun.IDB, name, address string) (*SignInLimitError, error) {
	var pairAt, addrAt, userAt sql.NullTime
	var now time.Time
	err := q.QueryRowContext(ctx, signInRefusalSQL, name, address, s.cfg.SignInWindow.Microseconds(),
		s.cfg.MaxFailuresPerUserAddress-1, s.cfg.MaxFailuresPerAddress-1, s.cfg.MaxFailuresPerUser-1).
		Scan(&pairAt, &addrAt, &userAt, &now)
	if err != nil {
		return nil, fmt.Errorf("count failed sign-ins: %w", err)
	}
	// The refusal lasts until every limit reached is clear again: the latest of their ends.
	var latest time.Time
	for _, at := range []sql.NullTime{pairAt, addrAt, userAt} {
		if at.Valid && at.Time.After(latest) {
			latest = at.Time
		}
	}
	if latest.IsZero() {
		return nil, nil
	}
	return &SignInLimitError{RetryAt: latest.Add(s.cfg.SignInWindow), Now: now}, nil
}

// reserveAttempt counts the attempt as a failure in advance and returns its row id, or refuses.
// A refusal is first looked for without locks, so a flood is refused without waiting on them.
func (s *Service) reserveAttempt(ctx context.Context, name, address string) (int64, error) {
	if lim, err := s.refusal(ctx, s.db, name, address); err != nil || lim != nil {
		if lim != nil {
			return 0, lim
		}
		return 0, err
	}
	var id int64
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// Name before address, always: no two attempts wait on each other in a cycle.
		if _, err := tx.Tx.ExecContext(ctx, signInLockSQL, lockClassSignInUser, name); err != nil {
			return fmt.Errorf("lock sign-in name: %w", err)
		}
		if _, err := tx.Tx.ExecContext(ctx, signInLockSQL, lockClassSignInAddress, address); err != nil {
			return fmt.Errorf("lock sign-in address: %w", err)
		}
		lim, err := s.refusal(ctx, tx, name, address)
		if err != nil {
			return err
		}
		if lim != nil {
			return lim
		}
		return tx.Tx.QueryRowContext(ctx, signInFailureSQL, name, address).Scan(&id)
	})
	var lim *SignInLimitError
	if errors.As(err, &lim) {
		return 0, lim
	}
	if err != nil {
		return 0, fmt.Errorf("record sign-in attempt: %w", err)
	}
	return id, nil
}

// releaseAttempt takes back the failure counted in advance. Should the delete fail, the attempt
// stays counted: the safe side.
func (s *Service) releaseAttempt(ctx context.Context, id int64) {
	_, _ = s.db.DB.ExecContext(ctx, signInReleaseSQL, id)
}

// verifyLimited runs VerifyPassword in one of the process's hash slots.
func (s *Service) verifyLimited(ctx context.Context, password, hash string) (bool, error) {
	select {
	case s.hashSlots <- struct{}{}:
	default:
		// Only a sign-in that finds every slot taken waits, so a free slot is never lost to
		// a timer that fired at the same moment.
		wait := time.NewTimer(s.cfg.HashWait)
		defer wait.Stop()
		select {
		case s.hashSlots <- struct{}{}:
		case <-wait.C:
			return false, ErrSignInBusy
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	defer func() { <-s.hashSlots }()
	return VerifyPassword(password, hash)
}

// capKey bounds what is stored of a client-chosen string.
func capKey(s string) string {
	if len(s) > maxKeyLen {
		return s[:maxKeyLen]
	}
	return s
}

// addressKey is what failures of one client address are counted under: an IPv4 address as is,
// an IPv6 address by its /64 (one subscriber commonly holds a whole /64).
func addressKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return capKey(addr)
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return capKey(addr)
	}
	return p.String()
}
