package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
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

// Config configures a Keeper.
type Config struct {
	// DB is the database of the jobs (required).
	DB *bun.DB
	// Every is how often every execution is beaten (default 30 s).
	Every time.Duration
	// Logger receives a failed beat's warning (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("heartbeat: Config.DB is required")
	case c.Every < 0:
		return fmt.Errorf("heartbeat: Config.Every %v must not be negative", c.Every)
	}
	if c.Every == 0 {
		c.Every = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Keeper proves every execution of this process alive, and records what each has written so
// far, once per interval in one statement however many run: LLM calls are long, and a process
// may hold thousands at once. The statement is a heap-only update of each job row (no index
// covers what it writes), so thousands of rows cost little more than one.
type Keeper struct {
	db    *bun.DB
	every time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	execs map[*beating]struct{}
	// looping is set while loop runs: from the first execution added to the last removed.
	looping bool
}

// beating is one execution the Keeper keeps alive.
type beating struct {
	jobID uuid.UUID
	claim string
	// progress says what the execution has written so far (nil: it writes no output).
	progress func() output.Progress
	// lost is called once when a heartbeat finds the job no longer running under the claim
	// (cancelled or reclaimed), so the execution abandons its provider call.
	lost func()
}

// New validates cfg and returns a Keeper; it beats only while executions are added.
func New(cfg Config) (*Keeper, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Keeper{db: cfg.DB, every: cfg.Every, log: cfg.Logger, execs: map[*beating]struct{}{}}, nil
}

// Add keeps the execution of jobID under claim alive until the returned remove is called;
// each beat also records progress() (nil: nothing written).
func (h *Keeper) Add(jobID uuid.UUID, claim string, progress func() output.Progress, lost func()) (remove func()) {
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

// Holds reports whether an execution of this process runs under claim now.
func (h *Keeper) Holds(claim string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for b := range h.execs {
		if b.claim == claim {
			return true
		}
	}
	return false
}

// Orphaned reports whether a running job's claim is one worker workerID of this process made
// and no execution of it holds: the claim committed while its worker saw an error (a
// connection that timed out reading the commit's answer), so nothing runs the job. Its
// heartbeat is fresh but proves nothing, and waiting for it to go stale would leave the job
// idle that long. A vehicle of a running job is fetched again only after its previous attempt
// ended, so no execution of this process is between its claim and its registration here.
func (h *Keeper) Orphaned(job db.Job, workerID string) bool {
	if job.WorkerClaim == nil || !strings.HasPrefix(*job.WorkerClaim, workerID+"/") {
		return false
	}
	return !h.Holds(*job.WorkerClaim)
}

// loop beats every execution once per interval while executions run (the first time within
// one interval of being added), and ends with the last.
func (h *Keeper) loop() {
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

// beat sends one heartbeat for every execution and tells those whose claim is gone.
func (h *Keeper) beat(ctx context.Context) error {
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
