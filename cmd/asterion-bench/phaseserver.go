package main

// The server of one load phase (chunks, inflight, governed, fairness): each needs settings of
// its own (workers, heartbeat interval, provider limit, org share), so each starts its own
// `asterion serve` on a fresh database, and reads PostgreSQL's own counters of that database
// to say how much work the server gave it.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// phaseServer is a running `asterion serve` of one phase and the bench's handles on it.
type phaseServer struct {
	cmd    *exec.Cmd
	dbName string
	dbURL  string
	// api and submit talk to the server as its admin; pool reads its database (a few
	// connections, so the probes hardly show in the server's figures); admin reads the
	// cluster's statistics from the maintenance database, where its own statements do not
	// count.
	api    *apiClient
	submit *target
	pool   *pgxpool.Pool
	admin  *pgx.Conn
}

// startPhaseServer creates the database <prefix>_<suffix>, turns on PostgreSQL's counting of
// PL/pgSQL function calls there, starts `asterion serve` on it with the bench's environment
// plus env (later entries win), and signs in as its admin.
func startPhaseServer(ctx context.Context, cfg config, suffix string, env ...string) (*phaseServer, error) {
	name := cfg.dbPrefix + "_" + suffix
	dbURL, err := freshDatabase(ctx, cfg.adminURL, name)
	if err != nil {
		return nil, err
	}
	admin, err := pgx.Connect(ctx, cfg.adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", cfg.adminURL, err)
	}
	s := &phaseServer{dbName: name, dbURL: dbURL, admin: admin}
	// Set before the server connects, so all its sessions count the governor's functions.
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET track_functions = 'pl'"); err != nil {
		s.close()
		return nil, fmt.Errorf("count function calls in %s: %w", name, err)
	}
	addr := freePort()
	s.cmd = exec.Command(cfg.bin, "serve", "--addr", addr)
	s.cmd.Env = append(asterionEnv(dbURL), env...)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.close()
		return nil, fmt.Errorf("start asterion serve for the %s phase: %w", suffix, err)
	}
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		s.close()
		return nil, err
	}
	tok, err := runCLI(cfg.bin, dbURL, "", "token", "create", "--user", "admin")
	if err != nil {
		s.close()
		return nil, err
	}
	s.api = newAPIClient("http://"+addr, tok)
	s.submit = newTarget("asterion "+suffix, "http://"+addr+"/sa-core/v1/prompt", tok)
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("parse %s: %w", dbURL, err)
	}
	pc.MaxConns = 4
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		s.close()
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	return s, nil
}

// pid is the server process's id.
func (s *phaseServer) pid() int { return s.cmd.Process.Pid }

// close stops the server and closes the bench's connections.
func (s *phaseServer) close() {
	if s.cmd != nil {
		stopProcess(s.cmd)
	}
	if s.pool != nil {
		s.pool.Close()
	}
	_ = s.admin.Close(context.Background())
}

// dbCounters are cumulative counters of the phase's database.
type dbCounters struct {
	// Xacts is committed plus rolled-back transactions (pg_stat_database): every statement
	// the server sends outside an explicit transaction is one, so the difference over a window
	// bounds its statements from below and counts its round trips to commit.
	Xacts int64
	// JobUpdates and OutputInserts are rows updated in sa_job and inserted in sa_job_output.
	JobUpdates, OutputInserts int64
	// Reserve and Observe are calls of asterion_governor_reserve and _observe.
	Reserve, Observe int64
	// Conns is the number of sessions open on the database now.
	Conns int64
}

func (c dbCounters) minus(o dbCounters) dbCounters {
	return dbCounters{Xacts: c.Xacts - o.Xacts, JobUpdates: c.JobUpdates - o.JobUpdates, OutputInserts: c.OutputInserts - o.OutputInserts,
		Reserve: c.Reserve - o.Reserve, Observe: c.Observe - o.Observe, Conns: c.Conns}
}

// counters reads the database's counters. PostgreSQL's backends report their statistics when
// they go idle, at most once a second (a backend idle since then within 10 s), so a reading
// lags the truth by about a second: windows are many seconds long.
func (s *phaseServer) counters(ctx context.Context) (dbCounters, error) {
	var c dbCounters
	err := s.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback,
		(SELECT count(*) FROM pg_stat_activity WHERE datname = $1) FROM pg_stat_database WHERE datname = $1`, s.dbName).Scan(&c.Xacts, &c.Conns)
	if err != nil {
		return c, fmt.Errorf("read transaction counters of %s: %w", s.dbName, err)
	}
	err = s.pool.QueryRow(ctx, `SELECT
		coalesce((SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'sa_job'), 0),
		coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'sa_job_output'), 0),
		coalesce((SELECT sum(calls) FROM pg_stat_user_functions WHERE funcname = 'asterion_governor_reserve'), 0)::bigint,
		coalesce((SELECT sum(calls) FROM pg_stat_user_functions WHERE funcname = 'asterion_governor_observe'), 0)::bigint`).
		Scan(&c.JobUpdates, &c.OutputInserts, &c.Reserve, &c.Observe)
	if err != nil {
		return c, fmt.Errorf("read table and function counters of %s: %w", s.dbName, err)
	}
	return c, nil
}

// window reads the counters, waits d, and returns the difference.
func (s *phaseServer) window(ctx context.Context, d time.Duration) (dbCounters, error) {
	c0, err := s.counters(ctx)
	if err != nil {
		return c0, err
	}
	time.Sleep(d)
	c1, err := s.counters(ctx)
	if err != nil {
		return c1, err
	}
	return c1.minus(c0), nil
}

// submitMany submits the texts with 50 clients and returns the job ids in order.
func (s *phaseServer) submitMany(ctx context.Context, texts []string) ([]string, error) {
	ids := make([]string, len(texts))
	errs := make(chan error, len(texts))
	next := make(chan int, len(texts))
	for i := range texts {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sub, err := s.api.submit(ctx, texts[i])
				if err != nil {
					errs <- err
					return
				}
				ids[i] = sub.JobID
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return ids, nil
}

// countJobs counts the jobs among ids in one of states.
func (s *phaseServer) countJobs(ctx context.Context, ids []string, states ...string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sa_job WHERE id = ANY($1::uuid[]) AND state = ANY($2)`, ids, states).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs in %v: %w", states, err)
	}
	return n, nil
}

// waitJobs polls until at least want of ids are in one of states, or d has passed; it
// returns the last count.
func (s *phaseServer) waitJobs(ctx context.Context, ids []string, want int, d time.Duration, states ...string) (int, error) {
	deadline := time.Now().Add(d)
	for {
		n, err := s.countJobs(ctx, ids, states...)
		if err != nil || n >= want || time.Now().After(deadline) {
			return n, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// idle waits until the server has no job queued or running, at most d.
func (s *phaseServer) idle(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sa_job WHERE state IN ('queued', 'running')`).Scan(&n); err != nil {
			return fmt.Errorf("count unfinished jobs: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d jobs still unfinished after %s", n, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rssSampler records the highest VmRSS of a process, sampled every 100 ms until stopped.
type rssSampler struct {
	peak atomic64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(pid int) *rssSampler {
	r := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib, err := vmRSSKiB(pid); err == nil {
				r.peak.max(kib)
			}
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// end stops sampling and returns the peak in KiB.
func (r *rssSampler) end() int64 {
	close(r.stop)
	<-r.done
	return r.peak.load()
}

// atomic64 is an int64 that only grows, shared by a sampler and its reader.
type atomic64 struct {
	mu sync.Mutex
	v  int64
}

func (a *atomic64) max(v int64) {
	a.mu.Lock()
	a.v = max(a.v, v)
	a.mu.Unlock()
}

func (a *atomic64) load() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v
}
