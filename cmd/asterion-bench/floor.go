package main

// The floor of a job's records: the rows the contract makes every answered prompt leave behind,
// written the cheapest way there is, with none of the server's logic around them. Each step of
// a job's life (submit, claim, finish) is one statement in its own implicit transaction, with
// every value known in advance; there is no budget, governor, fair share, lock, read or
// retry. What the database spends on these statements is what any implementation of the same
// records pays on the same machine, so the end-to-end phase's statement time per job reads
// against it: the distance between the two is the server's logic, the floor itself is the
// price of the records.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"asterion/jobs/feed"
)

// floorQueue is the River queue and kind of the floor's River jobs: no client works it, so a
// floor job is moved only by the floor's own statements.
const floorQueue = "asterion_bench_floor"

// floorPart is one data-modifying clause of a floor statement, named for the group of records
// it writes so that a run can leave a group out and read its price.
type floorPart struct {
	group string
	sql   string
}

// The groups of records a run may leave out; the River job, the job, the prompt and the
// response are always written.
const (
	floorRegistry = "registry" // the operation row and its history entries
	floorFeed     = "feed"     // the change-feed events, and the sequencer that numbers them
	floorRecords  = "records"  // the ledger, attempt, audit and flows-to edge rows
	floorOutput   = "output"   // the output chunk
)

// floorGroups are the groups -floor-without accepts.
var floorGroups = []string{floorRegistry, floorFeed, floorRecords, floorOutput}

// floorSubmitParts write what a submit leaves: the prompt, its operation with the first entry
// of the operation's history, the River job, the job, and its change-feed event.
var floorSubmitParts = []floorPart{
	{"", `p AS (
    SELECT gen_random_uuid() AS pid, gen_random_uuid() AS jid, gen_random_uuid() AS oid
)`},
	{"", `r AS (
    INSERT INTO river_job (args, kind, max_attempts, priority, queue, state)
    SELECT jsonb_build_object('job_id', jid, 'prompt_id', pid), $4, 3, 2, $4, 'available' FROM p RETURNING id
)`},
	{"", `e AS (
    INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by)
    SELECT pid, 'prompt', $3, pid, 'authored', 'open', $1, $2 FROM p
)`},
	{floorRegistry, `o AS (
    INSERT INTO sa_operation (id, kind, owner, status, org_id, created_by, subject, correlation_id, expires_at,
        retry_after_seconds, history_seq, history_digest, history_at)
    SELECT oid, 'prompt.execute', 'asterion.jobs', 'pending', $1, $2, jsonb_build_object('job_id', jid, 'prompt_id', pid),
        pid, now() + interval '15 minutes', 2, 1, encode(sha256(oid::text::bytea), 'hex'), now() FROM p
)`},
	{floorRegistry, `h AS (
    INSERT INTO sa_operation_history (operation_id, seq, status, at, doc_digest, prev_digest, entry_digest)
    SELECT oid, 1, 'pending', now(), encode(sha256(pid::text::bytea), 'hex'), repeat('0', 64),
        encode(sha256(oid::text::bytea), 'hex') FROM p
)`},
	{"", `j AS (
    INSERT INTO sa_job (id, prompt_id, execution_options, org_id, created_by, operation_id, river_job_id)
    SELECT jid, pid, '{"model": "sim-1"}', $1, $2, oid, r.id FROM p, r
)`},
	{floorFeed, `ev AS (
    INSERT INTO sa_event (topic, org_id, user_id, prompt_id, job_id, operation_id, payload)
    SELECT 'job.state_changed', $1, $2, pid, jid, oid, jsonb_build_object('prompt_id', pid, 'job_id', jid,
        'state', 'queued', 'attempt', 1, 'updated_at', now(), 'operation_id', oid, 'operation_status', 'pending') FROM p
)`},
}

// floorSubmitMain returns the ids the later steps name.
const floorSubmitMain = `SELECT p.pid, p.jid, p.oid, r.id FROM p, r`

// floorClaimParams names the type of every parameter of the claim and the finish, so that a
// statement that leaves out the clauses using some of them still takes them all: PostgreSQL
// reads a parameter's type from an unused clause as from any other.
const floorClaimParams = `v AS (
    SELECT $1::uuid AS pid, $2::uuid AS jid, $3::uuid AS oid, $4::bigint AS rid, $5::text AS claim, $6::bigint AS org,
        $7::bigint AS usr
)`

// floorClaimParts write what a start leaves besides River's attempt: the job and its operation
// running, the operation's second history entry and the job's event.
var floorClaimParts = []floorPart{
	{"", floorClaimParams},
	{"", `j AS (
    UPDATE sa_job SET state = 'running', updated_at = now(), worker_claim = $5, claimed_at = now(), started_at = now(),
        running_heartbeat_at = now() WHERE id = $2 AND state = 'queued'
)`},
	{floorRegistry, `o AS (
    UPDATE sa_operation SET status = 'running', updated_at = now(), history_seq = 2,
        history_digest = encode(sha256(($3::uuid)::text::bytea), 'hex'), history_at = now() WHERE id = $3
)`},
	{floorRegistry, `h AS (
    INSERT INTO sa_operation_history (operation_id, seq, status, at, doc_digest, prev_digest, entry_digest)
    VALUES ($3, 2, 'running', now(), repeat('a', 64), repeat('b', 64), repeat('c', 64))
)`},
	{floorFeed, `ev AS (
    INSERT INTO sa_event (topic, org_id, user_id, prompt_id, job_id, operation_id, payload)
    VALUES ('job.state_changed', $6, $7, $1, $2, $3, jsonb_build_object('prompt_id', $1::uuid, 'job_id', $2::uuid,
        'state', 'running', 'attempt', 1, 'updated_at', now(), 'operation_id', $3::uuid, 'operation_status', 'running'))
)`},
}

// floorClaimMain is River's attempt.
const floorClaimMain = `UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = now(),
    attempted_by = ARRAY[$5::text] WHERE id = $4`

// floorFinishParts write what an answer leaves besides River's completion: the output chunk,
// the response and its flows-to edge, the ledger and attempt rows, the job and its operation
// settled with the third history entry, the job's event and the audit entry.
var floorFinishParts = []floorPart{
	{"", floorClaimParams + `, w AS (SELECT $8::text AS answer)`},
	{"", `x AS (
    SELECT gen_random_uuid() AS rid
)`},
	{floorOutput, `c AS (
    INSERT INTO sa_job_output (job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by)
    VALUES ($2, 1, 1, $8, 12, $1, $6, $7)
)`},
	{"", `e AS (
    INSERT INTO sa_entity (id, kind, body, correlation_id, parent_id, causation_id, source_refs, truth_class, state_class,
        org_id, created_by)
    SELECT rid, 'response', $8, $1, $1, $2, jsonb_build_array(jsonb_build_object('provider', 'sim', 'model', 'sim-1',
        'job_id', $2::uuid)), 'generated', 'settled', $6, $7 FROM x
)`},
	{floorRecords, `g AS (
    INSERT INTO sa_edge (kind, from_id, to_id, org_id) SELECT 'flows-to', $1, rid, $6 FROM x
)`},
	{floorRecords, `l AS (
    INSERT INTO sa_ledger (job_id, prompt_id, response_id, org_id, provider, model, prompt_tokens, completion_tokens, duration_ms)
    SELECT $2, $1, rid, $6, 'sim', 'sim-1', 9, 12, 0 FROM x
)`},
	{floorRecords, `a AS (
    INSERT INTO sa_attempt (job_id, attempt, org_id, model, started_at, input_tokens, output_tokens, cost_usd)
    VALUES ($2, 1, $6, 'sim-1', now(), 9, 12, 0)
)`},
	{"", `j AS (
    UPDATE sa_job SET state = 'succeeded', updated_at = now(), response_id = x.rid, finished_at = now()
    FROM x WHERE id = $2 AND state = 'running'
)`},
	{floorRegistry, `o AS (
    UPDATE sa_operation SET status = 'completed', updated_at = now(), terminal_at = now(),
        result = jsonb_build_object('prompt_id', $1::uuid, 'job_id', $2::uuid), history_seq = 3,
        history_digest = repeat('d', 64), history_at = now() WHERE id = $3
)`},
	{floorRegistry, `h AS (
    INSERT INTO sa_operation_history (operation_id, seq, status, at, doc_digest, prev_digest, entry_digest)
    VALUES ($3, 3, 'completed', now(), repeat('a', 64), repeat('c', 64), repeat('d', 64))
)`},
	{floorFeed, `ev AS (
    INSERT INTO sa_event (topic, org_id, user_id, prompt_id, job_id, operation_id, payload)
    SELECT 'job.state_changed', $6, $7, $1, $2, $3, jsonb_build_object('prompt_id', $1::uuid, 'job_id', $2::uuid,
        'state', 'succeeded', 'attempt', 1, 'response_id', rid, 'updated_at', now(), 'operation_id', $3::uuid,
        'operation_status', 'completed') FROM x
)`},
	{floorRecords, `au AS (
    INSERT INTO sa_audit (org_id, actor, action, subject_type, subject_id, detail)
    SELECT $6, 'worker:' || $5, 'job.succeeded', 'job', $2::text, jsonb_build_object('response_id', rid, 'attempt', 1) FROM x
)`},
}

// floorFinishMain is River's completion.
const floorFinishMain = `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $4`

// floorStatements are the three statements of a floor job.
type floorStatements struct{ submit, claim, finish string }

// floorSQL builds the floor's statements without the groups named in without. Every
// statement takes the same parameters whatever it leaves out (floorClaimParams), so a clause
// left out never shifts the numbers of the others.
func floorSQL(without []string) floorStatements {
	build := func(parts []floorPart, main string) string {
		var kept []string
		for _, p := range parts {
			if p.group == "" || !slices.Contains(without, p.group) {
				kept = append(kept, p.sql)
			}
		}
		return "WITH " + strings.Join(kept, ", ") + "\n" + main
	}
	return floorStatements{
		submit: build(floorSubmitParts, floorSubmitMain),
		claim:  build(floorClaimParts, floorClaimMain),
		finish: build(floorFinishParts, floorFinishMain),
	}
}

// parseFloorWithout reads -floor-without: groups of floorGroups, comma-separated.
func parseFloorWithout(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, g := range strings.Split(list, ",") {
		g = strings.TrimSpace(g)
		if !slices.Contains(floorGroups, g) {
			return nil, fmt.Errorf("-floor-without: want groups among %s, got %q", strings.Join(floorGroups, ","), g)
		}
		out = append(out, g)
	}
	return out, nil
}

// floorPrompt and floorAnswer are the texts the floor writes, the sizes of the end-to-end
// phase's.
const (
	floorPrompt = "Summarise the deferred operation in one sentence, please."
	floorAnswer = "sim answer: the deferred operation settled in one sentence."
)

// floorResult is what the floor phase measured.
type floorResult struct {
	Jobs    int `json:"jobs"`
	Workers int `json:"workers"`
	// Without names the groups of records the run left out (none in a full run).
	Without    []string      `json:"without,omitempty"`
	Seconds    float64       `json:"seconds"`
	JobsPerSec float64       `json:"jobs_per_sec"`
	Cost       *dbCostResult `json:"db_cost,omitempty"`
}

// floorOwner is the org and user the floor's rows belong to.
type floorOwner struct{ org, user int64 }

// runFloor writes the records of n jobs through workers connections of pool, each job's three
// steps in turn, while one sequencer numbers their events after the commits as the server's
// does, and returns when every job and event is written.
func runFloor(ctx context.Context, pool *pgxpool.Pool, owner floorOwner, without []string, workers, n int) (floorResult, error) {
	r := floorResult{Workers: workers, Without: without}
	stmts := floorSQL(without)
	numbered := !slices.Contains(without, floorFeed)
	var next atomic.Int64
	poke := make(chan struct{}, 1)
	seqDone := make(chan error, 1)
	stop := make(chan struct{})
	if numbered {
		go func() { seqDone <- sequenceWhilePoked(ctx, pool, poke, stop) }()
	} else {
		seqDone <- nil
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			claim := "floor/" + strconv.Itoa(w)
			for next.Add(1) <= int64(n) {
				if err := floorJob(ctx, pool, stmts, owner, claim, poke); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-seqDone; err != nil {
		return r, err
	}
	r.Seconds = time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	r.Jobs = n
	r.JobsPerSec = float64(n) / r.Seconds
	return r, nil
}

// floorJob writes one job's records, poking the sequencer after each step's commit.
func floorJob(ctx context.Context, pool *pgxpool.Pool, stmts floorStatements, owner floorOwner, claim string, poke chan<- struct{}) error {
	var pid, jid, oid string
	var rid int64
	if err := pool.QueryRow(ctx, stmts.submit, owner.org, owner.user, floorPrompt, floorQueue).Scan(&pid, &jid, &oid, &rid); err != nil {
		return fmt.Errorf("floor submit: %w", err)
	}
	pokeSequencer(poke)
	for _, step := range []struct {
		name, sql string
		args      []any
	}{
		{"claim", stmts.claim, []any{pid, jid, oid, rid, claim, owner.org, owner.user}},
		{"finish", stmts.finish, []any{pid, jid, oid, rid, claim, owner.org, owner.user, floorAnswer}},
	} {
		tag, err := pool.Exec(ctx, step.sql, step.args...)
		if err != nil {
			return fmt.Errorf("floor %s of job %s: %w", step.name, jid, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("floor %s of job %s: River's job %d not found", step.name, jid, rid)
		}
		pokeSequencer(poke)
	}
	return nil
}

// pokeSequencer asks the sequencer for a run, coalescing with a request not yet taken.
func pokeSequencer(poke chan<- struct{}) {
	select {
	case poke <- struct{}{}:
	default:
	}
}

// sequenceWhilePoked numbers the events after each poke until stop is closed, then numbers
// what is left.
func sequenceWhilePoked(ctx context.Context, pool *pgxpool.Pool, poke <-chan struct{}, stop <-chan struct{}) error {
	for {
		select {
		case <-poke:
			if _, _, err := feed.Sequence(ctx, pool); err != nil {
				return err
			}
		case <-stop:
			_, _, err := feed.Sequence(ctx, pool)
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// floorPhase writes the floor's jobs into a fresh database migrated to Asterion's schema and
// measures what their statements cost, as the end-to-end phase's are measured.
func floorPhase(ctx context.Context, cfg config) (*floorResult, error) {
	dbURL, err := freshDatabase(ctx, cfg.adminURL, cfg.dbPrefix+"_floor")
	if err != nil {
		return nil, err
	}
	if _, err := runCLI(cfg.bin, dbURL, "", "migrate", "up"); err != nil {
		return nil, err
	}
	probeURL, err := prepareCostCounters(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: no database cost figures for the floor:", err)
		probeURL = ""
	}
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", dbURL, err)
	}
	pc.MaxConns = int32(cfg.workers) + 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to the floor's database: %w", err)
	}
	defer pool.Close()
	var owner floorOwner
	if err := pool.QueryRow(ctx, "INSERT INTO orgs (name) VALUES ('bench-floor') RETURNING id").Scan(&owner.org); err != nil {
		return nil, fmt.Errorf("create the floor's org: %w", err)
	}
	if err := pool.QueryRow(ctx, "INSERT INTO users (org_id, name, role) VALUES ($1, 'bench-floor', 'member') RETURNING id",
		owner.org).Scan(&owner.user); err != nil {
		return nil, fmt.Errorf("create the floor's user: %w", err)
	}
	// The same warm-up as the servers': connections open and plans cached before the count.
	if _, err := runFloor(ctx, pool, owner, cfg.floorWithout, cfg.workers, 200); err != nil {
		return nil, err
	}
	var r floorResult
	run := func() (int, error) {
		var err error
		r, err = runFloor(ctx, pool, owner, cfg.floorWithout, cfg.workers, cfg.e2eJobs)
		return r.Jobs, err
	}
	if probeURL == "" {
		_, err := run()
		return &r, err
	}
	probe, err := pgxpool.New(ctx, probeURL)
	if err != nil {
		return nil, fmt.Errorf("connect the probe to the floor's database: %w", err)
	}
	defer probe.Close()
	cost, err := measureCost(ctx, probe, "floor", floorStep, run)
	if err != nil {
		return nil, err
	}
	r.Cost = cost
	return &r, nil
}

// floorStep says which step of a job's life a statement of the floor is.
var floorStep = classifyBy([]stepRule{
	{"finish", regexp.MustCompile(`finalized_at = now\(\)`)},
	{"claim", regexp.MustCompile(`attempted_by = ARRAY`)},
	{"submit", regexp.MustCompile(`SELECT gen_random_uuid\(\) AS pid`)},
})
