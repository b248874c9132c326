package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// probe reads a target's own tables to measure what HTTP cannot: pickup and completion.
type probe struct {
	pool *pgxpool.Pool
	q    queries
	// noWorkers says the target runs no workers: its jobs never finish, and drain only vacuums.
	noWorkers bool
}

type queries struct {
	// inFlight counts jobs not yet finished. It runs every 100 ms while a phase drains, so it
	// reads the unfinished jobs only (each side's indexes of its queued and running jobs), never
	// the finished ones the phases before left behind: a count that walked them would take a
	// share of the database's CPU that grows with every phase, and the end-to-end phase drains
	// while it is measured.
	inFlight string
	// pickup returns p50 and p95 of queued→running in ms for jobs created after $1.
	pickup string
}

var asterionQueries = queries{
	inFlight: `SELECT (SELECT count(*) FROM sa_job WHERE state = 'queued') + (SELECT count(*) FROM sa_job WHERE state = 'running')`,
	pickup: `SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - created_at)), 0) * 1000,
	                coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - created_at)), 0) * 1000
	         FROM sa_job WHERE created_at >= $1 AND claimed_at IS NOT NULL`,
}

var baselineQueries = queries{
	inFlight: `SELECT count(*) FROM river_job WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`,
	pickup: `SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - created_at)), 0) * 1000,
	                coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - created_at)), 0) * 1000
	         FROM river_job WHERE created_at >= $1 AND attempted_at IS NOT NULL`,
}

func newProbe(ctx context.Context, url string, q queries) (*probe, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	return &probe{pool: pool, q: q}, nil
}

// drain waits until the target has finished every job (at most 5 minutes; not at all for a
// target without workers), then vacuums its database, so that no phase starts among the dead
// rows of the phases before it (each job leaves several row versions in the job, registry,
// event and River tables) or while autovacuum is still catching up with them. Both sides are
// vacuumed alike.
func (p *probe) drain(ctx context.Context) {
	p.waitFinished(ctx)
	p.vacuum(ctx)
}

// waitFinished waits until the target has finished every job, at most 5 minutes, or not at
// all for a target without workers.
func (p *probe) waitFinished(ctx context.Context) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var n int
		if err := p.pool.QueryRow(ctx, p.q.inFlight).Scan(&n); err == nil && (n == 0 || p.noWorkers) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "warning: queue did not drain in 5 minutes")
}

// vacuum vacuums and analyzes the target's database.
func (p *probe) vacuum(ctx context.Context) {
	if _, err := p.pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		fmt.Fprintln(os.Stderr, "warning: vacuum after draining:", err)
	}
}

// pickupResult is queued→running latency with idle workers.
type pickupResult struct {
	Jobs  int     `json:"jobs"`
	P50ms float64 `json:"p50_ms"`
	P95ms float64 `json:"p95_ms"`
}

// pickup submits n prompts one at a time, 30 ms apart, to idle workers.
func (p *probe) pickup(ctx context.Context, t *target, n int) (pickupResult, error) {
	var since time.Time
	if err := p.pool.QueryRow(ctx, "SELECT now()").Scan(&since); err != nil {
		return pickupResult{}, err
	}
	for i := 0; i < n; i++ {
		t.post()
		time.Sleep(30 * time.Millisecond)
	}
	p.drain(ctx)
	var r pickupResult
	r.Jobs = n
	err := p.pool.QueryRow(ctx, p.q.pickup, since).Scan(&r.P50ms, &r.P95ms)
	return r, err
}

// e2eResult is end-to-end throughput: submit n jobs with 50 clients and wait for all to finish.
type e2eResult struct {
	Jobs       int     `json:"jobs"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_s"`
}

func (p *probe) endToEnd(ctx context.Context, t *target, n int) (e2eResult, error) {
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		next <- struct{}{}
	}
	close(next)
	for c := 0; c < 50; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				t.post()
			}
		}()
	}
	wg.Wait()
	// The phase ends when the last job has finished; the vacuum after it is the bench's own
	// housekeeping, longer on the side whose database the earlier phases left larger.
	p.waitFinished(ctx)
	el := time.Since(start)
	p.vacuum(ctx)
	return e2eResult{Jobs: n, Seconds: el.Seconds(), JobsPerSec: float64(n) / el.Seconds()}, nil
}
