package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// What a job refused by fair share waits for, as sa_job.waiting_for says it.
const (
	// WaitingOrgShare: the job's org already runs its most jobs at once.
	WaitingOrgShare = "org_share"
	// WaitingOrgPaused: an operator paused the job's org.
	WaitingOrgPaused = "org_paused"
)

// Args are what a vehicle's arguments say of the job it carries, and what the worker needs of
// the job it is to run: the governor's model and token estimate, and the org for the cap.
type Args struct {
	Job      uuid.UUID
	Org      int64 // 0 on vehicles made before the org was named: no cap is checked
	Priority int
	Model    string
	Tokens   int
}

// Vehicle is a River job a worker has fetched: a free slot of River's Priority (a band of job
// priorities), fetched at its place ScheduledAt, whose arguments name a job (which may no
// longer be the one it carries).
type Vehicle struct {
	ID          int64
	Priority    int
	ScheduledAt time.Time
	Args        Args
}

// Outcome says what a worker does with the vehicle it fetched.
type Outcome int

const (
	// Run: claim the job of Decision.Args (after the governor's slot).
	Run Outcome = iota
	// Wait: the job may not run yet (its org is paused or at its cap); snooze for Decision.Wait
	// with the job saying Decision.WaitingFor.
	Wait
	// Decline: the job is above the worker's priority ceiling; give the vehicle back.
	Decline
)

// Decision is the answer of Dispatch: Args describe the job the vehicle now carries.
type Decision struct {
	Outcome    Outcome
	Args       Args
	Wait       time.Duration
	WaitingFor string
	Reason     string
	// Swapped is true when the vehicle was given another job than the one it carried.
	Swapped bool
}

// Counts are how the dispatches of a Share went since it was made.
type Counts struct {
	// Fast dispatches decided on their one read; Locked ones took the dispatch lock; Own ones
	// looked for a better job of their own org only (no other org had work to choose), in a
	// transaction of their own without the dispatch lock.
	Fast, Locked, Own int64
	// Swapped dispatches gave their vehicle another job.
	Swapped int64
}

// Share decides which queued job a fetched vehicle carries, and holds the running cap.
type Share struct {
	cfg                        Config
	fast, locked, own, swapped atomic.Int64
}

// New validates cfg and returns a Share.
func New(cfg Config) (*Share, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Share{cfg: cfg}, nil
}

// PausedRecheck is how soon a paused org's job is looked at again.
func (s *Share) PausedRecheck() time.Duration { return s.cfg.PausedRecheck }

// CapRecheck is how soon a job refused for its org's cap is looked at again.
func (s *Share) CapRecheck() time.Duration { return s.cfg.CapRecheck }

// Counts returns how the dispatches went so far.
func (s *Share) Counts() Counts {
	return Counts{Fast: s.fast.Load(), Locked: s.locked.Load(), Own: s.own.Load(), Swapped: s.swapped.Load()}
}

// vehicleJob is a row of vehicleJobSQL.
type vehicleJob struct {
	id        uuid.UUID
	orgID     int64
	state     string
	priority  int
	createdAt time.Time
	weight    int
	paused    bool
	running   int // the org's running jobs, counted up to the cap; 0 without a cap
	others    bool
	better    bool
	model     string
	body      sql.NullString
}

// Dispatch decides which job the fetched vehicle v carries: the org is chosen first (the org
// with queued work holding the fewest worker slots per weight, whatever the priorities), then
// that org's best job (lowest band, then oldest), swapping vehicles when the choice is not the
// job on v. ceiling ≥ 0 bounds the priority of a job the worker may run. The common case (one
// org with queued work, the vehicle's job its best) is one read.
func (s *Share) Dispatch(ctx context.Context, v Vehicle, ceiling int) (Decision, error) {
	most := 100
	if ceiling >= 0 {
		most = ceiling
	}
	var x vehicleJob
	err := s.cfg.DB.DB.QueryRowContext(ctx, vehicleJobSQL, v.ID, v.Args.Job, most, s.cfg.OrgMaxRunning).Scan(&x.id,
		&x.orgID, &x.state, &x.priority, &x.createdAt, &x.weight, &x.paused, &x.running, &x.others, &x.better,
		&x.model, &x.body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// No live job rides this vehicle: the one its arguments name settled on it (the
		// claim then drops it), or moved to another vehicle (the claim sees that too).
		s.fast.Add(1)
		return Decision{Outcome: Run, Args: v.Args}, nil
	case err != nil:
		return Decision{}, fmt.Errorf("read the job of vehicle %d: %w", v.ID, err)
	}
	args := x.argsOn(v.Args)
	if x.state != stateQueued {
		s.fast.Add(1)
		return Decision{Outcome: Run, Args: args}, nil
	}
	if ceiling >= 0 && x.priority > ceiling {
		s.fast.Add(1)
		return Decision{Outcome: Decline, Args: args}, nil
	}
	atCap := s.cfg.OrgMaxRunning > 0 && x.running >= s.cfg.OrgMaxRunning
	switch {
	case !x.others && !x.paused && !atCap && !x.better:
		s.fast.Add(1)
		return Decision{Outcome: Run, Args: args}, nil
	case !x.others && (x.paused || atCap):
		s.fast.Add(1)
		return s.refusal(args, x.paused), nil
	}
	// With no other org to weigh, the choice is the org's own order, which needs no dispatch
	// before it to be seen: the candidate's lock (SKIP LOCKED) keeps two dispatches from
	// taking the same job, so the dispatch lock would only queue this one behind the others.
	weigh := x.others
	if weigh {
		s.locked.Add(1)
	} else {
		s.own.Add(1)
	}
	var d Decision
	err = s.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		d, err = s.swapTx(ctx, tx, v, most, weigh)
		return err
	})
	if err != nil {
		return Decision{}, fmt.Errorf("dispatch vehicle %d: %w", v.ID, err)
	}
	if d.Swapped {
		s.swapped.Add(1)
	}
	return d, nil
}

// stateQueued is sa_job.state of a job waiting for a worker.
const stateQueued = "queued"

// argsOn are the arguments of x as the vehicle with arguments a carries it: a's own when x is
// a's job, else x's model and an estimate of its prompt's tokens.
func (x vehicleJob) argsOn(a Args) Args {
	if x.id == a.Job {
		a.Org = x.orgID
		return a
	}
	return Args{Job: x.id, Org: x.orgID, Priority: x.priority, Model: x.model, Tokens: provider.EstimateTokens(x.body.String)}
}

// refusal is the answer for a job whose org is paused or at its cap while no other org has
// work to give the slot.
func (s *Share) refusal(args Args, paused bool) Decision {
	if paused {
		return Decision{Outcome: Wait, Args: args, Wait: s.cfg.PausedRecheck, WaitingFor: WaitingOrgPaused,
			Reason: "the org is paused"}
	}
	return Decision{Outcome: Wait, Args: args, Wait: s.cfg.CapRecheck, WaitingFor: WaitingOrgShare,
		Reason: "the org runs its most jobs at once"}
}
