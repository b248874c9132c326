package admit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// The starts of one process go to the database together: while one statement of start holds
// runs, the starts asked for meanwhile wait, and the next statement carries all of them. An
// idle process sends a start at once, alone; a busy one locks each org's running counter once
// per statement instead of once per start, which is what the starts of a busy org otherwise
// queue on.

// startBatchMax bounds the starts of one statement.
const startBatchMax = 64

// startBatchTimeout bounds one statement of start holds. It does not hang on the context of
// any one start: the others of its statement would fail with it.
const startBatchTimeout = 30 * time.Second

// startAsk is one start waiting for its hold.
type startAsk struct {
	jobID, holdID uuid.UUID
	// done receives the answer once; buffered, so that the sender never waits.
	done chan startAnswer
	// gone says the asker stopped waiting (its context ended) before its answer came: a hold
	// made for it is given back by the sender. Guarded by startBatch.mu.
	gone bool
}

// startAnswer is what the database said of one start: row is nil when the job is not queued.
type startAnswer struct {
	row *startHoldRow
	err error
}

// startBatch gathers the starts of one process.
type startBatch struct {
	mu      sync.Mutex
	pending []*startAsk
	// sending says a goroutine is sending the pending starts; it sends until none are left.
	sending bool
}

// holdStart asks for the hold of job's start under the name hold and waits for the answer,
// sent with the other starts pending by then.
func (a *Admission) holdStart(ctx context.Context, job, hold uuid.UUID) (*startHoldRow, error) {
	ask := &startAsk{jobID: job, holdID: hold, done: make(chan startAnswer, 1)}
	b := &a.starts
	b.mu.Lock()
	b.pending = append(b.pending, ask)
	if !b.sending {
		b.sending = true
		go a.sendStarts()
	}
	b.mu.Unlock()
	select {
	case ans := <-ask.done:
		return ans.row, ans.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case ans := <-ask.done:
		return ans.row, ans.err
	default:
		ask.gone = true
		return nil, fmt.Errorf("hold the start of job %s: %w", job, context.Cause(ctx))
	}
}

// sendStarts sends the pending starts, at most startBatchMax a statement, until none are
// left.
func (a *Admission) sendStarts() {
	b := &a.starts
	for {
		b.mu.Lock()
		n := min(len(b.pending), startBatchMax)
		if n == 0 {
			b.sending = false
			b.mu.Unlock()
			return
		}
		asks := b.pending[:n:n]
		b.pending = append([]*startAsk(nil), b.pending[n:]...)
		b.mu.Unlock()
		answers := a.sendStartBatch(asks)
		var abandoned []StartHeld
		b.mu.Lock()
		for i, ask := range asks {
			if !ask.gone {
				ask.done <- answers[i]
				continue
			}
			if r := answers[i].row; r != nil && r.Outcome == "held" {
				abandoned = append(abandoned, StartHeld{jobID: ask.jobID, id: ask.holdID})
			}
		}
		b.mu.Unlock()
		for _, h := range abandoned {
			ctx, cancel := context.WithTimeout(context.Background(), startBatchTimeout)
			if err := a.GiveBackStart(ctx, h); err != nil {
				a.cfg.Log.Warn("a start hold nobody waited for was not given back; a later start of its org sweeps it",
					"job_id", h.jobID, "err", err)
			}
			cancel()
		}
	}
}

// sendStartBatch holds the starts of asks in one statement and answers each, in order.
func (a *Admission) sendStartBatch(asks []*startAsk) []startAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), startBatchTimeout)
	defer cancel()
	jobs := make([]uuid.UUID, len(asks))
	holds := make([]uuid.UUID, len(asks))
	for i, ask := range asks {
		jobs[i], holds[i] = ask.jobID, ask.holdID
	}
	answers := make([]startAnswer, len(asks))
	var rows []startHoldRow
	err := a.cfg.DB.NewRaw(startHoldsSQL, pgdialect.Array(holds), pgdialect.Array(jobs), a.cfg.Now().UTC()).Scan(ctx, &rows)
	if err != nil {
		err = fmt.Errorf("hold the starts of %d jobs: %w", len(asks), err)
		for i := range answers {
			answers[i].err = err
		}
		return answers
	}
	byJob := make(map[uuid.UUID]*startHoldRow, len(rows))
	for i := range rows {
		byJob[rows[i].Job] = &rows[i]
	}
	for i, ask := range asks {
		answers[i].row = byJob[ask.jobID]
	}
	return answers
}
