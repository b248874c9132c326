package heartbeat

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/output"
)

// newKeeper is a Keeper over bunDB beating every interval, logging nowhere.
func newKeeper(t *testing.T, bunDB *bun.DB, every time.Duration) *Keeper {
	t.Helper()
	h, err := New(Config{DB: bunDB, Every: every, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"no database", Config{}, false},
		{"a negative interval", Config{DB: &bun.DB{}, Every: -time.Second}, false},
		{"the defaults", Config{DB: &bun.DB{}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, err := New(c.cfg)
			if (err == nil) != c.ok {
				t.Fatalf("New(%+v): %v, want ok %v", c.cfg, err, c.ok)
			}
			if c.ok && (h.every != 30*time.Second || h.log == nil) {
				t.Errorf("defaults: every %v, logger %v", h.every, h.log)
			}
		})
	}
}

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
	h := newKeeper(t, d.Bun, time.Hour)
	const n = 50
	ids := make([]uuid.UUID, n)
	var lost [n]atomic.Int32
	for i := range ids {
		claim := "w/" + uuid.NewString()[:8]
		ids[i] = runningJobRow(t, d, claim)
		h.Add(ids[i], claim, nil, func() { lost[i].Add(1) })
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
	h := newKeeper(t, d.Bun, time.Hour)
	claim := "w/x"
	id := runningJobRow(t, d, claim)
	remove := h.Add(id, claim, nil, func() { t.Error("a removed execution was told its claim is lost") })
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
	h := newKeeper(t, d.Bun, 20*time.Millisecond)
	claim := "w/own"
	id := runningJobRow(t, d, claim)
	lost := make(chan struct{})
	defer h.Add(id, claim, nil, func() { close(lost) })()
	dbtest.WaitFor(t, 10*time.Second, "the first beat", func() bool { return heartbeatAt(t, d, id).After(time.Now().Add(-time.Minute)) })
	if _, err := d.Bun.NewRaw("UPDATE sa_job SET worker_claim = NULL WHERE id = ?", id).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("never told the claim is lost")
	}
}

// TestHeartbeatsCarryProgress: each beat records what every execution has written so far, in
// its job row, and a later beat records the later figures.
func TestHeartbeatsCarryProgress(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	h := newKeeper(t, d.Bun, time.Hour)
	const n = 20
	ids := make([]uuid.UUID, n)
	var written [n]atomic.Int64
	for i := range ids {
		claim := "w/" + uuid.NewString()[:8]
		ids[i] = runningJobRow(t, d, claim)
		written[i].Store(int64(i))
		h.Add(ids[i], claim, func() output.Progress {
			w := int(written[i].Load())
			return output.Progress{Chunks: w, Pieces: 3 * w}
		}, func() { t.Errorf("execution %d was told its claim is lost", i) })
	}
	// The job without output beside them records none.
	quiet := runningJobRow(t, d, "w/quiet")
	h.Add(quiet, "w/quiet", nil, func() { t.Error("the quiet execution was told its claim is lost") })
	for round := 1; round <= 2; round++ {
		if err := h.beat(ctx); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			var j db.Job
			if err := d.Bun.NewSelect().Model(&j).Where("id = ?", id).Scan(ctx); err != nil {
				t.Fatal(err)
			}
			if want := int(written[i].Load()); j.ProgressChunks != want || j.ProgressTokens != 3*want {
				t.Errorf("round %d, execution %d: progress %d chunks %d tokens, want %d and %d",
					round, i, j.ProgressChunks, j.ProgressTokens, want, 3*want)
			}
			written[i].Add(5)
		}
	}
	var q db.Job
	if err := d.Bun.NewSelect().Model(&q).Where("id = ?", quiet).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if q.ProgressChunks != 0 || q.ProgressTokens != 0 || !q.RunningHeartbeatAt.After(time.Now().Add(-time.Minute)) {
		t.Errorf("the quiet execution: progress %d/%d, heartbeat %v", q.ProgressChunks, q.ProgressTokens, q.RunningHeartbeatAt)
	}
}

// TestHeartbeatIsAHeapOnlyUpdate: the heartbeat statement changes no indexed column of a job
// row, nor its updated_at (which is indexed), so PostgreSQL can write a beat as a heap-only
// update and one statement can beat thousands of running jobs at little cost. An index on
// what it writes, or a trigger moving updated_at, makes this fail.
func TestHeartbeatIsAHeapOnlyUpdate(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	claim := "w/" + uuid.NewString()[:8]
	id := runningJobRow(t, d, claim)
	var before db.Job
	if err := d.Bun.NewSelect().Model(&before).Where("id = ?", id).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal([]map[string]any{{"id": id, "claim": claim, "chunks": 4, "tokens": 9}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.DB.ExecContext(ctx, heartbeatSQL, string(payload)); err != nil {
		t.Fatal(err)
	}
	var after db.Job
	if err := d.Bun.NewSelect().Model(&after).Where("id = ?", id).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) || !after.RunningHeartbeatAt.After(*before.RunningHeartbeatAt) || after.ProgressChunks != 4 {
		t.Errorf("after a beat: updated_at %v (was %v), heartbeat %v (was %v), chunks %d",
			after.UpdatedAt, before.UpdatedAt, after.RunningHeartbeatAt, before.RunningHeartbeatAt, after.ProgressChunks)
	}
	rows, err := d.Bun.DB.QueryContext(ctx, `SELECT indexdef FROM pg_indexes WHERE tablename = 'sa_job'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var def string
		if err := rows.Scan(&def); err != nil {
			t.Fatal(err)
		}
		for _, written := range []string{"running_heartbeat_at", "progress_chunks", "progress_tokens"} {
			if strings.Contains(def, written) {
				t.Errorf("an index covers %s, which every heartbeat writes: %s", written, def)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
