package output_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/feed"
	"asterion/jobs/output"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// runningJob is a job row running attempt under claim, for org and user.
type runningJob struct {
	ID      uuid.UUID
	OrgID   int64
	UserID  int64
	Attempt int
	Claim   string
}

// newRunningJob writes an org (or reuses orgID when non-zero), a user, a prompt and a job
// running attempt 1 under a fresh claim.
func newRunningJob(t *testing.T, d *dbtest.DB, orgID int64) runningJob {
	t.Helper()
	ctx := context.Background()
	if orgID == 0 {
		org := &db.Org{Name: "org-" + uuid.NewString()[:8]}
		if _, err := d.Bun.NewInsert().Model(org).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		orgID = org.ID
	}
	user := &db.User{OrgID: orgID, Name: "u-" + uuid.NewString()[:8], Role: "member"}
	if _, err := d.Bun.NewInsert().Model(user).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	prompt := &db.Entity{ID: uuid.New(), Kind: "prompt", Body: "p", CorrelationID: uuid.New(), TruthClass: "authored",
		StateClass: "pending", OrgID: orgID, CreatedBy: user.ID}
	if _, err := d.Bun.NewInsert().Model(prompt).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	claim := "w/" + uuid.NewString()[:8]
	job := &db.Job{ID: uuid.New(), PromptID: prompt.ID, State: "running", Priority: 50, Attempt: 1, MaxAttempts: 3,
		ExecutionOptions: json.RawMessage(`{}`), WorkerClaim: &claim, OrgID: orgID, CreatedBy: user.ID}
	if _, err := d.Bun.NewInsert().Model(job).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return runningJob{ID: job.ID, OrgID: orgID, UserID: user.ID, Attempt: 1, Claim: claim}
}

func (j runningJob) ref() output.Ref {
	return output.Ref{JobID: j.ID, Attempt: j.Attempt, Claim: j.Claim}
}

func newWriter(t *testing.T, d *dbtest.DB, publish func([]db.OutputChunk)) *output.Writer {
	t.Helper()
	w, err := output.NewWriter(output.WriterConfig{DB: d.Bun, Logger: discard, Publish: publish})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func stored(t *testing.T, d *dbtest.DB, j runningJob) []db.OutputChunk {
	t.Helper()
	cs, err := db.OutputAfter(context.Background(), d.Bun, j.ID, j.Attempt, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func texts(cs []db.OutputChunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

func TestWriterCoalescesPiecesIntoNumberedChunks(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	a, b := newRunningJob(t, d, 0), newRunningJob(t, d, 0)
	w := newWriter(t, d, nil)
	sa, sb := w.Open(a.ref()), w.Open(b.ref())
	sa.Write("Hel")
	sa.Write("lo")
	sb.Write("B1")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil { // nothing pending: no empty chunk
		t.Fatal(err)
	}
	sa.Write(", ")
	sa.Write("world")
	if err := sa.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sa.Write(" after close")
	got := stored(t, d, a)
	if strings.Join(texts(got), "|") != "Hello|, world" || got[0].Seq != 1 || got[1].Seq != 2 || got[0].Pieces != 2 {
		t.Fatalf("job a chunks %+v", got)
	}
	if strings.Join(texts(got), "") != sa.Text() {
		t.Errorf("chunks make %q, stream text %q", strings.Join(texts(got), ""), sa.Text())
	}
	if got[0].OrgID != a.OrgID || got[0].CreatedBy != a.UserID {
		t.Errorf("chunk scope org %d user %d, want %d %d", got[0].OrgID, got[0].CreatedBy, a.OrgID, a.UserID)
	}
	if p := sa.Progress(); p != (output.Progress{Chunks: 2, Pieces: 4}) {
		t.Errorf("Progress = %+v", p)
	}
	if gb := stored(t, d, b); len(gb) != 1 || gb[0].Text != "B1" {
		t.Errorf("job b chunks %+v", gb)
	}
	chunks, pieces, err := db.OutputProgress(ctx, d.Bun, a.ID, 1)
	if err != nil || chunks != 2 || pieces != 4 {
		t.Errorf("OutputProgress = %d %d %v", chunks, pieces, err)
	}
}

// TestWriterDropsOutputOfALostClaim: a job reclaimed (claim gone) or moved to another attempt
// keeps none of the old execution's later chunks.
func TestWriterDropsOutputOfALostClaim(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		steal string
	}{
		{"claim cleared by a reclaim", "UPDATE sa_job SET worker_claim = NULL, state = 'queued' WHERE id = ?"},
		{"next attempt running", "UPDATE sa_job SET attempt = 2, worker_claim = 'other' WHERE id = ?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newRunningJob(t, d, 0)
			w := newWriter(t, d, nil)
			s := w.Open(j.ref())
			s.Write("kept")
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Bun.NewRaw(tt.steal, j.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			s.Write(" dropped")
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := texts(stored(t, d, j)); strings.Join(got, "|") != "kept" {
				t.Errorf("stored %q, want only the chunk written while the claim held", got)
			}
		})
	}
}

// TestWriterRetriesAFailedFlushUnderTheSameNumbers: a flush that fails keeps its chunk, and the
// next stores it with its seq, so the output has no gap and no repeat.
func TestWriterRetriesAFailedFlushUnderTheSameNumbers(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	j := newRunningJob(t, d, 0)
	w := newWriter(t, d, nil)
	s := w.Open(j.ref())
	s.Write("one")
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Flush(dead); err == nil {
		t.Fatal("a flush on a cancelled context succeeded")
	}
	s.Write(" two")
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := stored(t, d, j)
	if strings.Join(texts(got), "|") != "one| two" || got[0].Seq != 1 || got[1].Seq != 2 {
		t.Errorf("stored %+v", got)
	}
}

func TestWriterConfig(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	for _, cfg := range []output.WriterConfig{
		{},
		{DB: d.Bun, FlushEvery: 300 * time.Millisecond},
		{DB: d.Bun, FlushEvery: -time.Millisecond},
		{DB: d.Bun, Tag: "a b"},
	} {
		if _, err := output.NewWriter(cfg); err == nil {
			t.Errorf("NewWriter(%+v) accepted", cfg)
		}
	}
	w, err := output.NewWriter(output.WriterConfig{DB: d.Bun})
	if err != nil || w.Tag() == "" {
		t.Errorf("defaults: %v, tag %q", err, w.Tag())
	}
}

func newHub(t *testing.T, d *dbtest.DB, tag string) *output.Hub {
	t.Helper()
	h, err := output.NewHub(output.HubConfig{DB: d.Bun, Pool: d.Pool, Tag: tag, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	stop := h.Start(context.Background())
	t.Cleanup(stop)
	select {
	case <-h.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub never listened")
	}
	return h
}

// receive reads n chunks from s, failing after a deadline.
func receive(t *testing.T, s *output.Subscription, n int) []db.OutputChunk {
	t.Helper()
	var out []db.OutputChunk
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case c, ok := <-s.C:
			if !ok {
				t.Fatalf("subscription closed after %d chunks (lagged %v)", len(out), s.Lagged())
			}
			out = append(out, c)
		case <-deadline:
			t.Fatalf("received %d of %d chunks", len(out), n)
		}
	}
	return out
}

// TestHubsDeliverEveryChunkOnceInOrder: a writer's own hub gets its chunks directly, another
// process's hub through the announcement; both subscribers see 1..n once, in order, and a
// subscriber of another org sees none.
func TestHubsDeliverEveryChunkOnceInOrder(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	j := newRunningJob(t, d, 0)
	stranger := newRunningJob(t, d, 0)
	w0 := newWriter(t, d, nil)
	local := newHub(t, d, w0.Tag())
	w, err := output.NewWriter(output.WriterConfig{DB: d.Bun, Logger: discard, Tag: w0.Tag(), Publish: local.Publish})
	if err != nil {
		t.Fatal(err)
	}
	remote := newHub(t, d, "other-process")
	scope := feed.Scope{OrgID: j.OrgID, UserID: j.UserID}
	subLocal := local.Subscribe(output.Filter{Scope: scope}, 64)
	subRemote := remote.Subscribe(output.Filter{Scope: scope, JobID: j.ID}, 64)
	subOther := remote.Subscribe(output.Filter{Scope: feed.Scope{OrgID: stranger.OrgID}}, 64)
	s := w.Open(j.ref())
	const n = 12
	for i := 1; i <= n; i++ {
		s.Write("w" + strings.Repeat("x", i))
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, sub := range map[string]*output.Subscription{"local": subLocal, "remote": subRemote} {
		got := receive(t, sub, n)
		for i, c := range got {
			if c.Seq != i+1 || c.JobID != j.ID {
				t.Fatalf("%s hub: chunk %d is %d of %s", name, i, c.Seq, c.JobID)
			}
		}
	}
	select {
	case c := <-subOther.C:
		t.Errorf("another org's subscriber got chunk %d", c.Seq)
	default:
	}
	select {
	case c := <-subLocal.C:
		t.Errorf("local subscriber got chunk %d twice (own announcement not skipped)", c.Seq)
	default:
	}
}

// TestHubFillsAGapFromTheTable: a chunk that arrives after a missing one makes the hub read the
// missing one first.
func TestHubFillsAGapFromTheTable(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	j := newRunningJob(t, d, 0)
	var published [][]db.OutputChunk
	w := newWriter(t, d, func(cs []db.OutputChunk) { published = append(published, cs) })
	s := w.Open(j.ref())
	for _, p := range []string{"a", "b", "c"} {
		s.Write(p)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, err := output.NewHub(output.HubConfig{DB: d.Bun, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	sub := h.Subscribe(output.Filter{Scope: feed.Scope{AllOrgs: true}}, 8)
	h.Publish(published[2]) // chunk 3 alone: 1 and 2 come from the table
	h.Publish(published[1]) // already delivered: dropped
	t.Cleanup(h.Start(ctx))
	got := receive(t, sub, 3)
	if strings.Join(texts(got), "") != "abc" {
		t.Errorf("delivered %q, want a, b, c in order", texts(got))
	}
}

func TestHubDropsALaggingSubscriber(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	j := newRunningJob(t, d, 0)
	h, err := output.NewHub(output.HubConfig{DB: d.Bun, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, d, h.Publish)
	sub := h.Subscribe(output.Filter{Scope: feed.Scope{AllOrgs: true}}, 1)
	s := w.Open(j.ref())
	for _, p := range []string{"a", "b", "c"} {
		s.Write(p)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(h.Start(ctx))
	dbtest.WaitFor(t, 10*time.Second, "a subscriber that read nothing to be dropped", sub.Lagged)
	var n int
	for range sub.C {
		n++
	}
	if !sub.Lagged() || n != 1 {
		t.Errorf("lagged %v after %d chunks, want dropped after its buffer of 1", sub.Lagged(), n)
	}
}

// TestWriterFlushesOnItsOwnWhileStreamsAreOpen: without any call to Flush, text written to an
// open stream is stored within the flush interval.
func TestWriterFlushesOnItsOwnWhileStreamsAreOpen(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	j := newRunningJob(t, d, 0)
	got := make(chan []db.OutputChunk, 4)
	w, err := output.NewWriter(output.WriterConfig{DB: d.Bun, Logger: discard, FlushEvery: 20 * time.Millisecond,
		Publish: func(cs []db.OutputChunk) { got <- cs }})
	if err != nil {
		t.Fatal(err)
	}
	s := w.Open(j.ref())
	defer func() { _ = s.Close(context.Background()) }()
	s.Write("on its own")
	select {
	case cs := <-got:
		if len(cs) != 1 || cs[0].Text != "on its own" {
			t.Errorf("published %+v", cs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing stored without a Flush call")
	}
}
