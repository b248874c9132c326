package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/output"
)

// heartbeats proves every execution of this process alive, and records what each has written
// so far, once per interval in one statement however many run: LLM calls are long, and a
// process may hold thousands at once. The statement is a heap-only update of each job row (no
// index covers what it writes), so thousands of rows cost little more than one.
type heartbeats struct {
	db    *bun.DB
	every time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	execs map[*beating]struct{}
	// looping is set while loop runs: from the first execution added to the last removed.
	looping bool
}

// beating is one execution the heartbeats keep alive.
type beating struct {
	jobID uuid.UUID
	claim string
	// progress says what the execution has written so far (nil: it writes no output).
	progress func() output.Progress
	// lost is called once when a heartbeat finds the job no longer running under the claim
	// (cancelled or reclaimed), so the execution abandons its provider call.
	lost func()
}

func newHeartbeats(bunDB *bun.DB, every time.Duration, log *slog.Logger) *heartbeats {
	return &heartbeats{db: bunDB, every: every, log: log, execs: map[*beating]struct{}{}}
}

// add keeps the execution of jobID under claim alive until the returned remove is called;
// each beat also records progress() (nil: nothing written).
func (h *heartbeats) add(jobID uuid.UUID, claim string, progress func() output.Progress, lost func()) (remove func()) {
	b := &beating{jobID: jobID, claim: claim, progress: progress, lost: lost}
	h.mu.Lock()
	h.execs[b] = struct{}{}
	start := !h.looping
	h.looping = true
	h.mu.Unlock()
	if start {
		go h.loop()
	}
	return func() {
		h.mu.Lock()
		delete(h.execs, b)
		h.mu.Unlock()
	}
}

// holds reports whether an execution of this process runs under claim now.
func (h *heartbeats) holds(claim string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for b := range h.execs {
		if b.claim == claim {
			return true
		}
	}
	return false
}

// orphaned reports whether a running job's claim is one worker workerID of this process made
// and no execution of it holds: the claim committed while its worker saw an error (a
// connection that timed out reading the commit's answer), so nothing runs the job. Its
// heartbeat is fresh but proves nothing, and waiting for it to go stale would leave the job
// idle that long. A vehicle of a running job is fetched again only after its previous attempt
// ended, so no execution of this process is between its claim and its registration here.
func (h *heartbeats) orphaned(job db.Job, workerID string) bool {
	if job.WorkerClaim == nil || !strings.HasPrefix(*job.WorkerClaim, workerID+"/") {
		return false
	}
	return !h.holds(*job.WorkerClaim)
}

// loop beats every execution once per interval while executions run (the first time within
// one interval of being added), and ends with the last.
func (h *heartbeats) loop() {
	t := time.NewTicker(max(h.every, time.Millisecond))
	defer t.Stop()
	for {
		<-t.C
		h.mu.Lock()
		if len(h.execs) == 0 {
			h.looping = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), max(h.every, 5*time.Second))
		if err := h.beat(ctx); err != nil {
			h.log.Warn("heartbeat failed", "err", err)
		}
		cancel()
	}
}

// heartbeatSQL touches the heartbeat of every listed execution still running under its claim,
// records its progress, and returns the jobs it touched; the list comes as one JSON array so
// the text never changes.
const heartbeatSQL = `WITH v AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(id uuid, claim text, chunks integer, tokens integer)
)
UPDATE sa_job j SET running_heartbeat_at = now(), progress_chunks = v.chunks, progress_tokens = v.tokens
FROM v
WHERE j.id = v.id AND j.state = 'running' AND j.worker_claim = v.claim
RETURNING j.id`

// beat sends one heartbeat for every execution and tells those whose claim is gone.
func (h *heartbeats) beat(ctx context.Context) error {
	h.mu.Lock()
	execs := make([]*beating, 0, len(h.execs))
	for b := range h.execs {
		execs = append(execs, b)
	}
	h.mu.Unlock()
	if len(execs) == 0 {
		return nil
	}
	type row struct {
		ID     uuid.UUID `json:"id"`
		Claim  string    `json:"claim"`
		Chunks int       `json:"chunks"`
		Tokens int       `json:"tokens"`
	}
	list := make([]row, len(execs))
	for i, b := range execs {
		list[i] = row{ID: b.jobID, Claim: b.claim}
		if b.progress != nil {
			p := b.progress()
			list[i].Chunks, list[i].Tokens = p.Chunks, p.Pieces
		}
	}
	payload, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encode %d heartbeats: %w", len(execs), err)
	}
	rows, err := h.db.DB.QueryContext(ctx, heartbeatSQL, string(payload))
	if err != nil {
		return fmt.Errorf("heartbeat %d executions: %w", len(execs), err)
	}
	alive := make(map[uuid.UUID]bool, len(execs))
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("read heartbeat answer: %w", err)
		}
		alive[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("heartbeat %d executions: %w", len(execs), err)
	}
	for _, b := range execs {
		if !alive[b.jobID] {
			h.mu.Lock()
			_, still := h.execs[b]
			delete(h.execs, b)
			h.mu.Unlock()
			if still {
				b.lost()
			}
		}
	}
	return nil
}
