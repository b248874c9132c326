package readmodel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// stateRank orders a job's states along its life, for spotting a reader that goes backwards.
var stateRank = map[string]int{"queued": 0, "running": 1, "succeeded": 2, "failed": 2, "cancelled": 2, "superseded": 3}

// TestMissionRecentChainingMissesNothing: a reader chaining as_of into since while 8 writers
// submit (some cancelling, some failing once) and a runtime completes jobs sees every prompt's
// final state, and never sees a prompt go back to an earlier state.
func TestMissionRecentChainingMissesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, provider.NewSim(provider.SimConfig{MinLatency: 0, MaxLatency: 5 * time.Millisecond}))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 8)
	ctx := context.Background()
	const writers, each, limit = 8, 32, 50

	var (
		mu       sync.Mutex
		lastSeen = map[uuid.UUID]string{}
		lastJob  = map[uuid.UUID]uuid.UUID{}
		lastProg = map[uuid.UUID][2]int{}
		calls    int
	)
	var asOf *time.Time
	read := func() int {
		got, items, err := e.R.MissionRecent(ctx, e.V, asOf, limit)
		if err != nil {
			t.Errorf("MissionRecent: %v", err)
			return 0
		}
		if asOf != nil && got.Before(*asOf) {
			t.Errorf("as_of went back from %s to %s", asOf, got)
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		var prevChanged time.Time
		for _, it := range items {
			if it.ChangedAt.Before(prevChanged) {
				t.Errorf("items not oldest change first: %s after %s", it.ChangedAt, prevChanged)
			}
			prevChanged = it.ChangedAt
			if asOf != nil && it.ChangedAt.Before(*asOf) {
				t.Errorf("item changed at %s before since %s", it.ChangedAt, *asOf)
			}
			if it.Prompt.CreatedBy != e.U || it.Job.PromptID != it.Prompt.ID {
				t.Errorf("item %+v is not the member's prompt with its job", it)
			}
			id := it.Prompt.ID
			// A job moves forward along (attempt, state): a retry re-queues it with attempt+1.
			prog := [2]int{it.Job.Attempt, stateRank[it.Job.State]}
			if prev, ok := lastProg[id]; ok && lastJob[id] == it.Job.ID && (prog[0] < prev[0] || prog[0] == prev[0] && prog[1] < prev[1]) {
				t.Errorf("prompt %s went back from %v (%s) to %v (%s)", id, prev, lastSeen[id], prog, it.Job.State)
			}
			lastProg[id] = prog
			if it.Job.State == "succeeded" && (it.Response == nil || it.Job.ResponseID == nil || it.Response.ID != *it.Job.ResponseID) {
				t.Errorf("succeeded prompt %s without its response: %+v", id, it.Response)
			}
			lastSeen[id], lastJob[id] = it.Job.State, it.Job.ID
		}
		asOf = &got
		return len(items)
	}

	var writing, quit atomic.Bool
	writing.Store(true)
	readerDone := make(chan struct{})
	t.Cleanup(func() { quit.Store(true); <-readerDone })
	go func() {
		defer close(readerDone)
		for !quit.Load() && (writing.Load() || unsettled(e) != 0) {
			read()
			// Paces the reader between reads of the live field; nothing waits on it.
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				text := fmt.Sprintf("writer %d prompt %d", w, i)
				if i%7 == 3 {
					text += " #sim:fail=provider_5xx:1"
				}
				s, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: text})
				if err != nil {
					errs <- err
					return
				}
				if i%10 == 5 {
					if _, err := e.S.Cancel(ctx, e.V, s.JobID, jobs.Actor{Name: "test"}); err != nil && !errors.Is(err, jobs.ErrConflict) {
						errs <- err
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	writing.Store(false)
	close(errs)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	select {
	case <-readerDone:
	case <-time.After(150 * time.Second):
		jobstest.DumpQueue(e.T, e.D)
		t.Fatal("jobs never settled")
	}
	// Final calls after everything settled: drain until a page is not full.
	for read() == limit {
	}

	type final struct {
		PromptID uuid.UUID `bun:"prompt_id"`
		JobID    uuid.UUID `bun:"id"`
		State    string    `bun:"state"`
	}
	var finals []final
	if err := e.D.Bun.NewSelect().Table("sa_job").Column("prompt_id", "id", "state").Scan(ctx, &finals); err != nil {
		t.Fatal(err)
	}
	if len(finals) != writers*each {
		t.Fatalf("%d jobs, want %d", len(finals), writers*each)
	}
	byState := map[string]int{}
	for _, f := range finals {
		byState[f.State]++
		if got := lastSeen[f.PromptID]; got != f.State || lastJob[f.PromptID] != f.JobID {
			t.Errorf("prompt %s: reader last saw %q (job %s), final is %q (job %s)", f.PromptID, got, lastJob[f.PromptID], f.State, f.JobID)
		}
	}
	if byState["succeeded"] < writers*each/2 {
		t.Errorf("only %d succeeded: %v", byState["succeeded"], byState)
	}
	t.Logf("%d reads, final states %v", calls, byState)

	// Another member sees none of it; an operator of the org sees all of it.
	other := jobstest.CreateUser(t, e.D.Bun, e.O, "member")
	if _, items, err := e.R.MissionRecent(ctx, jobs.Viewer{OrgID: e.O, UserID: other}, nil, 500); err != nil || len(items) != 0 {
		t.Fatalf("another member sees %d items, %v", len(items), err)
	}
	if _, items, err := e.R.MissionRecent(ctx, e.Op, nil, 500); err != nil || len(items) != writers*each {
		t.Fatalf("operator sees %d items, %v", len(items), err)
	}
}

// unsettled counts queued and running jobs; -1 on error (safe off the test goroutine).
func unsettled(e *tenv) int {
	var n int
	if err := e.D.Bun.QueryRowContext(context.Background(),
		"SELECT count(*) FROM sa_job WHERE state IN ('queued', 'running')").Scan(&n); err != nil {
		e.T.Errorf("count unsettled jobs: %v", err)
		return -1
	}
	return n
}

// TestMissionRecentPagesThroughOneInstant: one transaction touching more prompts than a page
// dates them all at one instant; chaining as_of into since still reaches every one of them and
// then moves on, instead of handing back the same full page for ever.
func TestMissionRecentPagesThroughOneInstant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	const prompts, limit = 25, 10
	want := map[uuid.UUID]bool{}
	for i := 0; i < prompts; i++ {
		want[e.Submit(fmt.Sprintf("prompt %d", i)).PromptID] = true
	}
	if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET priority = priority WHERE created_by = ?", e.U); err != nil {
		t.Fatal(err)
	}
	var instant time.Time
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT max(updated_at) FROM sa_job").Scan(&instant); err != nil {
		t.Fatal(err)
	}
	seen := map[uuid.UUID]bool{}
	var since *time.Time
	for call := 0; ; call++ {
		if call == 5 {
			t.Fatalf("still paging after %d calls: saw %d of %d prompts, since %v", call, len(seen), prompts, since)
		}
		asOf, items, err := e.R.MissionRecent(ctx, e.V, since, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			seen[it.Prompt.ID] = true
		}
		if len(items) == 0 {
			break
		}
		if since != nil && !asOf.After(*since) {
			t.Fatalf("a non-empty page left as_of at %s", asOf)
		}
		since = &asOf
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("prompt %s never returned", id)
		}
	}
	if !since.After(instant) {
		t.Errorf("as_of %s did not move past the shared instant %s", since, instant)
	}
}
