package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// dispatchLock is the advisory lock of dispatches that weigh orgs against each other, so that
// each sees the choices of those before it. It is one for every band: a dispatch may give its
// slot to a job of any band, so dispatches of two bands weigh the same orgs and would each give
// the same light org a slot if they did not see each other's choice. A dispatch takes it only
// on the locked path, held for a few index reads.
const dispatchLock int64 = 0x6469737061746368

// anyTime bounds candidatesSQL's order for another org's job: every job of a band comes before
// it, so the bound is only the worker's ceiling's band.
var anyTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// orgLoad is an org with queued work: its weight, pause, running jobs, and the worker slots
// it holds (its running jobs and its fetched ones not claimed yet).
type orgLoad struct {
	id      int64
	weight  int
	paused  bool
	running int
	held    int
}

// lighter says whether o holds fewer slots than p relative to their weights.
func (o orgLoad) lighter(p orgLoad) bool {
	return o.held*max(p.weight, 1) < p.held*max(o.weight, 1)
}

// swapTx is the locked part of a dispatch: with the vehicle's job locked, it ranks the orgs
// with queued work that may run (not paused, under the cap) by slots held per weight, equals
// in random order, and gives the vehicle the best claimable job of the
// first org that has one, in any band the worker may run (for its own org: a job better than
// the one it carries). Without weigh (no other org had work to choose when the dispatch read)
// it looks at the vehicle's own org only and takes no dispatch lock.
func (s *Share) swapTx(ctx context.Context, tx bun.Tx, v Vehicle, most int, weigh bool) (Decision, error) {
	if weigh {
		if _, err := tx.Tx.ExecContext(ctx, advisoryLockSQL, dispatchLock); err != nil {
			return Decision{}, fmt.Errorf("take the dispatch lock: %w", err)
		}
	}
	var x struct {
		id        uuid.UUID
		orgID     int64
		state     string
		priority  int
		createdAt time.Time
	}
	err := tx.Tx.QueryRowContext(ctx, lockVehicleJobSQL, v.ID).Scan(&x.id, &x.orgID, &x.state, &x.priority, &x.createdAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Decision{Outcome: Run, Args: v.Args}, nil
	case err != nil:
		return Decision{}, fmt.Errorf("lock the job of vehicle %d: %w", v.ID, err)
	}
	if x.state != stateQueued {
		args, err := argsOf(ctx, tx, x.id, v.Args)
		return Decision{Outcome: Run, Args: args}, err
	}
	own := orgLoad{id: x.orgID, weight: 1}
	orgs := []orgLoad{own}
	if weigh {
		var err error
		if orgs, err = s.queuedOrgs(ctx, tx, v.ID, x.orgID); err != nil {
			return Decision{}, err
		}
	}
	var ranked []orgLoad
	for _, o := range orgs {
		if o.id == x.orgID {
			own = o
		}
		if !o.paused && (s.cfg.OrgMaxRunning <= 0 || o.running < s.cfg.OrgMaxRunning) {
			ranked = append(ranked, o)
		}
	}
	// Equals take turns: the order among them, the vehicle's own org included, is random. A
	// preference for the vehicle's org would give it every tie, and ties are the rule with one
	// worker: the org whose vehicles River fetches first (its jobs of a better band, say)
	// would keep the only slot until its backlog ran out.
	rnd := rand.New(rand.NewPCG(uint64(v.ID), uint64(time.Now().UnixNano())))
	rnd.Shuffle(len(ranked), func(i, k int) { ranked[i], ranked[k] = ranked[k], ranked[i] })
	slices.SortStableFunc(ranked, func(a, b orgLoad) int {
		switch {
		case a.lighter(b):
			return -1
		case b.lighter(a):
			return 1
		}
		return 0
	})
	displaced := sql.NullString{}
	if own.paused {
		displaced = sql.NullString{String: WaitingOrgPaused, Valid: true}
	} else if s.cfg.OrgMaxRunning > 0 && own.running >= s.cfg.OrgMaxRunning {
		displaced = sql.NullString{String: WaitingOrgShare, Valid: true}
	}
	probes := 0
	for _, o := range ranked {
		// Another org's job may be of any band the worker runs; the vehicle's own org gives
		// the slot only to a job before the one the vehicle carries in the org's order (by
		// the job's own band, not the vehicle's: a job a swap left on another band's vehicle
		// is found this way).
		bandOf, before := most, anyTime
		if o.id == x.orgID {
			bandOf, before = x.priority, x.createdAt
		} else if probes++; probes > s.cfg.MaxOrgProbes {
			continue
		}
		y, vy, err := lockCandidate(ctx, tx, o.id, bandOf, before, most)
		if errors.Is(err, sql.ErrNoRows) {
			if o.id == x.orgID {
				args, err := argsOf(ctx, tx, x.id, v.Args)
				return Decision{Outcome: Run, Args: args}, err
			}
			continue
		}
		if err != nil {
			return Decision{}, fmt.Errorf("find a job of org %d for vehicle %d: %w", o.id, v.ID, err)
		}
		res, err := tx.Tx.ExecContext(ctx, swapSQL, x.id, y, v.ID, vy, displaced)
		if err != nil {
			return Decision{}, fmt.Errorf("swap the vehicles of jobs %s and %s: %w", x.id, y, err)
		}
		if n, _ := res.RowsAffected(); n != 2 {
			return Decision{}, fmt.Errorf("swap the vehicles of jobs %s and %s: %d rows changed under the lock", x.id, y, n)
		}
		if !displaced.Valid {
			if _, err := tx.Tx.ExecContext(ctx, keepPlaceSQL, vy, v.ScheduledAt, v.Priority); err != nil {
				return Decision{}, fmt.Errorf("keep job %s's place on vehicle %d: %w", x.id, vy, err)
			}
		}
		args, err := argsOf(ctx, tx, y, v.Args)
		return Decision{Outcome: Run, Args: args, Swapped: true}, err
	}
	args, err := argsOf(ctx, tx, x.id, v.Args)
	return s.refusal(args, own.paused), err
}

// lockCandidate locks the best claimable job of org before (the band of priority bandOf,
// before) in the org's order, with a priority of at most most, and its vehicle; sql.ErrNoRows
// means none.
func lockCandidate(ctx context.Context, tx bun.Tx, org int64, bandOf int, before time.Time, most int) (uuid.UUID, int64, error) {
	type candidate struct {
		job     uuid.UUID
		vehicle int64
	}
	var list []candidate
	rows, err := tx.Tx.QueryContext(ctx, candidatesSQL, org, bandOf, before, most)
	if err != nil {
		return uuid.Nil, 0, err
	}
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.job, &c.vehicle); err != nil {
			rows.Close()
			return uuid.Nil, 0, err
		}
		list = append(list, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return uuid.Nil, 0, err
	}
	for _, c := range list {
		var id uuid.UUID
		err := tx.Tx.QueryRowContext(ctx, lockCandidateSQL, c.job, c.vehicle, most).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return uuid.Nil, 0, err
		}
		return c.job, c.vehicle, nil
	}
	return uuid.Nil, 0, sql.ErrNoRows
}

// queuedOrgs reads queuedOrgsSQL for a dispatch of vehicle carrying a job of org.
func (s *Share) queuedOrgs(ctx context.Context, tx bun.Tx, vehicle, org int64) ([]orgLoad, error) {
	rows, err := tx.Tx.QueryContext(ctx, queuedOrgsSQL, vehicle, s.cfg.Queue, org)
	if err != nil {
		return nil, fmt.Errorf("list the orgs with queued work: %w", err)
	}
	defer rows.Close()
	var out []orgLoad
	for rows.Next() {
		var o orgLoad
		if err := rows.Scan(&o.id, &o.weight, &o.paused, &o.running, &o.held); err != nil {
			return nil, fmt.Errorf("list the orgs with queued work: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the orgs with queued work: %w", err)
	}
	return out, nil
}

// argsOf are the arguments of job id as a vehicle with arguments a carries it: a's own when
// id is a's job, else read from the job.
func argsOf(ctx context.Context, tx bun.Tx, id uuid.UUID, a Args) (Args, error) {
	if id == a.Job && a.Org > 0 {
		return a, nil
	}
	out := Args{Job: id}
	var body string
	if err := tx.Tx.QueryRowContext(ctx, jobArgsSQL, id).Scan(&out.Priority, &out.Org, &out.Model, &body); err != nil {
		return Args{}, fmt.Errorf("read job %s: %w", id, err)
	}
	if id == a.Job {
		a.Org = out.Org
		return a, nil
	}
	out.Tokens = provider.EstimateTokens(body)
	return out, nil
}
