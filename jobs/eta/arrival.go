package eta

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A job just accepted is behind every claimable queued job of its band and of the bands before
// it, so its place needs no walk of the index from the job itself: counting the queue's front
// once per CacheFor, and adding what this process accepted since, places every submit of that
// second. A bounded walk of the index for every 202 would cost PostgreSQL work that grows with
// the backlog, on the path whose rate matters most.

// bands is one count per River priority band (index 1..4).
type bands [5]int

// upTo is the sum of the counts of bands 1..band.
func (b *bands) upTo(band int) int {
	n := 0
	for i := 1; i <= band && i < len(b); i++ {
		n += b[i]
	}
	return n
}

// queueFront is the queue's claimable front as last counted, with the jobs this process
// accepted since counted in.
type queueFront struct {
	mu      sync.Mutex
	counted time.Time
	all     bands
	orgs    map[int64]*bands
	// full is set when the count reached the bound; lastBand is then the band of the last job
	// counted, beyond which the count knows nothing.
	full     bool
	lastBand int
}

// place returns how many claimable jobs are ahead of a job of band and org accepted now (of its
// org's for aheadOrg), counting the front again when the last count is older than cacheFor,
// and counts the job in. counted is false when the job is past the bound.
func (q *queueFront) place(ctx context.Context, e *Estimator, band int, org int64) (ahead, aheadOrg int, counted bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// The job is committed before it is placed: a count made now has it in already.
	self := 0
	if now := time.Now(); q.counted.IsZero() || now.Sub(q.counted) >= e.cfg.CacheFor {
		if err := q.count(ctx, e); err != nil {
			return 0, 0, false, err
		}
		q.counted, self = now, 1
	}
	mine := q.orgs[org]
	if mine == nil {
		mine = new(bands)
		q.orgs[org] = mine
	}
	ahead, aheadOrg = max(q.all.upTo(band)-self, 0), max(mine.upTo(band)-self, 0)
	counted = !q.full || band < q.lastBand
	if self == 0 {
		q.all[band]++
		mine[band]++
	}
	return ahead, aheadOrg, counted, nil
}

// count reads the front again.
func (q *queueFront) count(ctx context.Context, e *Estimator) error {
	var rows []struct {
		B     int   `bun:"b"`
		OrgID int64 `bun:"org_id"`
		N     int   `bun:"n"`
	}
	if err := e.cfg.DB.NewRaw(frontSQL, e.cfg.CountCap).Scan(ctx, &rows); err != nil {
		return fmt.Errorf("count the queue's front: %w", err)
	}
	q.all, q.orgs, q.lastBand = bands{}, make(map[int64]*bands, len(rows)), 0
	total := 0
	for _, r := range rows {
		if r.B < 1 || r.B >= len(q.all) {
			continue
		}
		q.all[r.B] += r.N
		if q.orgs[r.OrgID] == nil {
			q.orgs[r.OrgID] = new(bands)
		}
		q.orgs[r.OrgID][r.B] += r.N
		q.lastBand = max(q.lastBand, r.B)
		total += r.N
	}
	q.full = total >= e.cfg.CountCap
	return nil
}

// Arrival is the ETA of a prompt job accepted just now in River priority band (1..4) for org, to run no
// earlier than scheduledFor (nil: at once). Its place comes from the queue's front counted at
// most once per CacheFor and the jobs this process accepted since; jobs another process
// accepted within that time are not counted yet, so the estimate may be early by what they
// add.
func (e *Estimator) Arrival(ctx context.Context, band int, org int64, scheduledFor *time.Time) (ETA, error) {
	now := time.Now()
	if scheduledFor != nil && scheduledFor.After(now) {
		return ETA{Seconds: ceilSeconds(scheduledFor.Sub(now)), Starts: true, ScheduledFor: scheduledFor}, nil
	}
	ahead, aheadOrg, counted, err := e.front.place(ctx, e, band, org)
	if err != nil {
		return ETA{}, err
	}
	s, peak, err := e.measure(ctx, !counted)
	if err != nil {
		return ETA{}, err
	}
	eta, _ := e.estimateJob(etaRow{State: stateQueued, CreatedAt: now, ScheduledAt: now, Now: now,
		Ahead: ahead, AheadOrg: aheadOrg, Counted: counted}, s, peak)
	return eta, nil
}
