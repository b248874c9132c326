package jobs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
)

// runningJobRow writes an org, a user, a prompt and a job running under claim.
func runningJobRow(t *testing.T, d *dbtest.DB, claim string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	org := &db.Org{Name: "org-" + uuid.NewString()[:8]}
	if _, err := d.Bun.NewInsert().Model(org).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	user := &db.User{OrgID: org.ID, Name: "u-" + uuid.NewString()[:8], Role: "member"}
	if _, err := d.Bun.NewInsert().Model(user).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	prompt := &db.Entity{ID: uuid.New(), Kind: "prompt", Body: "p", CorrelationID: uuid.New(), TruthClass: "authored",
		StateClass: "pending", OrgID: org.ID, CreatedBy: user.ID}
	if _, err := d.Bun.NewInsert().Model(prompt).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	job := &db.Job{ID: uuid.New(), PromptID: prompt.ID, State: "running", Priority: 50, Attempt: 1, MaxAttempts: 3,
		ExecutionOptions: json.RawMessage(`{}`), WorkerClaim: &claim, RunningHeartbeatAt: &long, OrgID: org.ID, CreatedBy: user.ID}
	if _, err := d.Bun.NewInsert().Model(job).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return job.ID
}

func heartbeatAt(t *testing.T, d *dbtest.DB, id uuid.UUID) time.Time {
	t.Helper()
	var at time.Time
	if err := d.Bun.NewSelect().Table("sa_job").Column("running_heartbeat_at").Where("id = ?", id).Scan(context.Background(), &at); err != nil {
		t.Fatal(err)
	}
	return at
}

// TestHeartbeatsBeatEveryExecutionAndReportLostClaims: one beat touches every execution still
// under its claim and tells the one whose claim is gone, once.
func TestHeartbeatsBeatEveryExecutionAndReportLostClaims(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	h := newHeartbeats(d.Bun, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	const n = 50
	ids := make([]uuid.UUID, n)
	var lost [n]atomic.Int32
	for i := range ids {
		claim := "w/" + uuid.NewString()[:8]
		ids[i] = runningJobRow(t, d, claim)
		h.add(ids[i], claim, func() { lost[i].Add(1) })
	}
	if _, err := d.Bun.NewRaw("UPDATE sa_job SET state = 'cancelled', worker_claim = NULL WHERE id = ?", ids[7]).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute)
	for round := 0; round < 2; round++ {
		if err := h.beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		switch {
		case i == 7:
			if lost[i].Load() != 1 {
				t.Errorf("the cancelled execution was told %d times, want once", lost[i].Load())
			}
		case lost[i].Load() != 0:
			t.Errorf("execution %d told its claim is lost", i)
		case !heartbeatAt(t, d, id).After(before):
			t.Errorf("execution %d not beaten", i)
		}
	}
}

func TestHeartbeatsRemoveStopsBeating(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	h := newHeartbeats(d.Bun, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	claim := "w/x"
	id := runningJobRow(t, d, claim)
	remove := h.add(id, claim, func() { t.Error("a removed execution was told its claim is lost") })
	remove()
	if _, err := d.Bun.NewRaw("UPDATE sa_job SET worker_claim = NULL WHERE id = ?", id).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if at := heartbeatAt(t, d, id); at.After(time.Now().Add(-time.Minute)) {
		t.Errorf("a removed execution was beaten at %v", at)
	}
}

// TestHeartbeatsBeatOnTheirOwn: an added execution is beaten within the interval, and told when
// its claim goes, with no call to beat.
func TestHeartbeatsBeatOnTheirOwn(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	h := newHeartbeats(d.Bun, 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	claim := "w/own"
	id := runningJobRow(t, d, claim)
	lost := make(chan struct{})
	defer h.add(id, claim, func() { close(lost) })()
	deadline := time.Now().Add(10 * time.Second)
	for !heartbeatAt(t, d, id).After(time.Now().Add(-time.Minute)) {
		if time.Now().After(deadline) {
			t.Fatal("never beaten")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := d.Bun.NewRaw("UPDATE sa_job SET worker_claim = NULL WHERE id = ?", id).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("never told the claim is lost")
	}
}

// TestHeartbeatsSlicesSplitTheExecutions: the loop's statements each beat one slice, the
// slices are even, and together they beat every execution exactly once.
func TestHeartbeatsSlicesSplitTheExecutions(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	h := newHeartbeats(d.Bun, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := 2 * beatSlices
	ids := make([]uuid.UUID, n)
	for i := range ids {
		claim := "w/" + uuid.NewString()[:8]
		ids[i] = runningJobRow(t, d, claim)
		h.add(ids[i], claim, func() { t.Errorf("execution %d was told its claim is lost", i) })
	}
	beaten := map[uuid.UUID]int{}
	for slice := 0; slice < beatSlices; slice++ {
		before := map[uuid.UUID]time.Time{}
		for _, id := range ids {
			before[id] = heartbeatAt(t, d, id)
		}
		if err := h.beatSlice(ctx, slice); err != nil {
			t.Fatal(err)
		}
		touched := 0
		for _, id := range ids {
			if heartbeatAt(t, d, id).After(before[id]) {
				beaten[id]++
				touched++
			}
		}
		if touched != n/beatSlices {
			t.Errorf("slice %d beat %d executions, want %d", slice, touched, n/beatSlices)
		}
	}
	for i, id := range ids {
		if beaten[id] != 1 {
			t.Errorf("execution %d was beaten %d times over the slices, want once", i, beaten[id])
		}
	}
}
