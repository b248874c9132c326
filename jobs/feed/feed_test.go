package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db/dbtest"
	"asterion/jobs/feed"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func ev(org, user int64, topic, label string) feed.Event {
	p, _ := json.Marshal(map[string]string{"label": label})
	id := uuid.New()
	return feed.Event{Topic: topic, OrgID: org, UserID: user, JobID: &id, Payload: p}
}

func label(e feed.Event) string {
	var m map[string]string
	_ = json.Unmarshal(e.Payload, &m)
	return m["label"]
}

func labels(es []feed.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = label(e)
	}
	return out
}

func publish(t *testing.T, d *dbtest.DB, events ...feed.Event) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := feed.Publish(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func sequence(t *testing.T, d *dbtest.DB) (int64, int) {
	t.Helper()
	last, n, err := feed.Sequence(context.Background(), d.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return last, n
}

func replay(t *testing.T, d *dbtest.DB, after int64, sc feed.Scope) []feed.Event {
	t.Helper()
	es, err := feed.Replay(context.Background(), d.Bun, after, sc, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

var all = feed.Scope{AllOrgs: true}

// TestSequenceCommitOrder: an event inserted first but committed last is numbered after the
// one that committed first, so a reader that replayed in between still gets it.
func TestSequenceCommitOrder(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	if last, n := sequence(t, d); last != 0 || n != 0 {
		t.Fatalf("empty feed sequenced to %d (%d)", last, n)
	}

	tx1, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Publish(ctx, tx1, ev(1, 1, feed.TopicJob, "early-insert")); err != nil {
		t.Fatal(err)
	}
	tx2, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Publish(ctx, tx2, ev(1, 1, feed.TopicJob, "late-insert")); err != nil {
		t.Fatal(err)
	}
	// A rolled-back event is never numbered nor seen.
	tx3, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Publish(ctx, tx3, ev(1, 1, feed.TopicJob, "rolled-back")); err != nil {
		t.Fatal(err)
	}
	if err := tx3.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}

	last1, n1 := sequence(t, d)
	if n1 != 1 || last1 != 1 {
		t.Fatalf("first sequence numbered %d up to %d, want only the committed event as 1", n1, last1)
	}
	reader := replay(t, d, 0, all)
	if got := labels(reader); len(got) != 1 || got[0] != "late-insert" || reader[0].Seq != 1 {
		t.Fatalf("reader after the first sequence got %v", got)
	}
	cursor := reader[len(reader)-1].Seq
	if hm, err := feed.HighMark(ctx, d.Bun); err != nil || hm != last1 {
		t.Fatalf("high mark %d, %v", hm, err)
	}

	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	// Until sequenced, the committed event is not readable by number.
	if got := replay(t, d, cursor, all); len(got) != 0 {
		t.Fatalf("an unnumbered event was replayed: %v", labels(got))
	}
	last2, n2 := sequence(t, d)
	if n2 != 1 || last2 != 2 {
		t.Fatalf("second sequence numbered %d up to %d", n2, last2)
	}
	more := replay(t, d, cursor, all)
	if got := labels(more); len(got) != 1 || got[0] != "early-insert" || more[0].Seq != 2 {
		t.Fatalf("the reader missed the late commit: %v", got)
	}
	// Numbers follow visibility, not insertion: the earlier-inserted row has the larger seq.
	var ids []int64
	if err := d.Bun.NewSelect().Table("sa_event").Column("id").OrderExpr("seq").Scan(ctx, &ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] < ids[1] {
		t.Fatalf("row ids in seq order %v, want the later insert first", ids)
	}
	if got := labels(replay(t, d, 0, all)); fmt.Sprint(got) != "[late-insert early-insert]" {
		t.Fatalf("full replay %v", got)
	}
	if last, n := sequence(t, d); last != 2 || n != 0 {
		t.Fatalf("idle sequence %d (%d)", last, n)
	}
}

// TestSequenceConcurrent: many writers and several sequencers at once; readers tailing by
// seq never see a gap filled later, and in the end every committed event has one number,
// 1..N without gaps.
func TestSequenceConcurrent(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	const writers, perWriter = 6, 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var seqWG sync.WaitGroup
	for s := 0; s < 3; s++ {
		seqWG.Add(1)
		go func() {
			defer seqWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := feed.Sequence(ctx, d.Pool); err != nil {
					t.Errorf("sequence: %v", err)
					return
				}
			}
		}()
	}
	// A tailing reader: each replay starts after the highest seq seen, and must never later
	// find a smaller seq it had skipped.
	seen := map[int64]bool{}
	var readerErr error
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var cursor int64
		for {
			es, err := feed.Replay(ctx, d.Bun, cursor, all, 1000)
			if err != nil {
				readerErr = err
				return
			}
			for _, e := range es {
				if e.Seq != cursor+1 {
					readerErr = fmt.Errorf("reader at %d got seq %d: a gap", cursor, e.Seq)
					return
				}
				seen[e.Seq] = true
				cursor = e.Seq
			}
			select {
			case <-stop:
				if len(es) == 0 {
					return
				}
			default:
			}
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				tx, err := d.Bun.BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if err := feed.Publish(ctx, tx, ev(1, int64(w), feed.TopicJob, fmt.Sprintf("%d-%d", w, i))); err != nil {
					t.Error(err)
					return
				}
				if i%5 == 4 {
					_ = tx.Rollback()
					continue
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	// Writers are done; one more sequence numbers any leftovers before the sequencers stop.
	sequence(t, d)
	close(stop)
	seqWG.Wait()
	<-readerDone
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	want := writers * perWriter * 4 / 5
	var total, numbered, maxSeq int
	if err := d.Bun.QueryRowContext(ctx, "SELECT count(*), count(seq), coalesce(max(seq), 0) FROM sa_event").Scan(&total, &numbered, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if total != want || numbered != want || maxSeq != want {
		t.Fatalf("%d events, %d numbered, max seq %d; want %d of each", total, numbered, maxSeq, want)
	}
	if len(seen) != want {
		t.Fatalf("the tailing reader saw %d events, want %d", len(seen), want)
	}
	if hm, _ := feed.HighMark(ctx, d.Bun); hm != int64(want) {
		t.Fatalf("high mark %d, want %d", hm, want)
	}
}

func TestScopeAndReplay(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	publish(t, d,
		ev(1, 10, feed.TopicJob, "o1u10-job"),
		ev(1, 11, feed.TopicJob, "o1u11-job"),
		ev(2, 20, feed.TopicJob, "o2u20-job"),
		ev(1, 10, feed.TopicOperation, "o1u10-op"),
		ev(2, 20, feed.TopicOperation, "o2u20-op"),
	)
	sequence(t, d)
	scopes := map[string]struct {
		sc   feed.Scope
		want string
	}{
		"member":           {feed.Scope{OrgID: 1, UserID: 10}, "[o1u10-job o1u10-op]"},
		"other member":     {feed.Scope{OrgID: 1, UserID: 11}, "[o1u11-job]"},
		"operator":         {feed.Scope{OrgID: 1}, "[o1u10-job o1u11-job o1u10-op]"},
		"operator org 2":   {feed.Scope{OrgID: 2}, "[o2u20-job o2u20-op]"},
		"admin":            {feed.Scope{AllOrgs: true}, "[o1u10-job o1u11-job o2u20-job o1u10-op o2u20-op]"},
		"admin, ops only":  {feed.Scope{AllOrgs: true, Topics: []string{feed.TopicOperation}}, "[o1u10-op o2u20-op]"},
		"member, jobs":     {feed.Scope{OrgID: 1, UserID: 10, Topics: []string{feed.TopicJob}}, "[o1u10-job]"},
		"member wrong org": {feed.Scope{OrgID: 2, UserID: 10}, "[]"},
		"org without rows": {feed.Scope{OrgID: 3}, "[]"},
	}
	everything := replay(t, d, 0, all)
	for name, c := range scopes {
		got := replay(t, d, 0, c.sc)
		if fmt.Sprint(labels(got)) != c.want {
			t.Errorf("%s: replay %v, want %s", name, labels(got), c.want)
		}
		// Allows agrees with Replay's filter.
		var allowed []feed.Event
		for _, e := range everything {
			if c.sc.Allows(e) {
				allowed = append(allowed, e)
			}
		}
		if fmt.Sprint(labels(allowed)) != c.want {
			t.Errorf("%s: Allows keeps %v, want %s", name, labels(allowed), c.want)
		}
	}
	// Replay after N returns exactly the events numbered above N, oldest first, up to limit.
	for n := int64(0); n <= 5; n++ {
		got := replay(t, d, n, all)
		if len(got) != int(5-n) {
			t.Fatalf("replay after %d returned %d events", n, len(got))
		}
		for i, e := range got {
			if e.Seq != n+int64(i)+1 {
				t.Fatalf("replay after %d: event %d has seq %d", n, i, e.Seq)
			}
		}
	}
	limited, err := feed.Replay(context.Background(), d.Bun, 1, all, 2)
	if err != nil || len(limited) != 2 || limited[0].Seq != 2 || limited[1].Seq != 3 {
		t.Fatalf("limited replay %+v, %v", limited, err)
	}
	if e := everything[0]; e.Topic != feed.TopicJob || e.OrgID != 1 || e.UserID != 10 || e.JobID == nil || e.CreatedAt.IsZero() {
		t.Fatalf("replayed event fields %+v", e)
	}
}

func startHub(t *testing.T, d *dbtest.DB) *feed.Hub {
	t.Helper()
	h := feed.NewHub(d.Pool, d.Bun, discard)
	feed.RunHub(t, h)
	return h
}

func receive(t *testing.T, s *feed.Subscription, n int) []feed.Event {
	t.Helper()
	var out []feed.Event
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-s.C:
			if !ok {
				t.Fatalf("subscription closed after %d of %d events (lagged %v)", len(out), n, s.Lagged())
			}
			out = append(out, e)
		case <-deadline:
			t.Fatalf("received %d of %d events", len(out), n)
		}
	}
	return out
}

// TestHubDelivers: the hub numbers and pushes committed events to every subscriber inside its
// scope, in order; a subscriber that does not read is dropped as lagged without holding the
// others back.
func TestHubDelivers(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	// Events before the hub starts are history: replayable, not pushed.
	publish(t, d, ev(1, 10, feed.TopicJob, "before"))
	sequence(t, d)
	h := startHub(t, d)
	fast := h.Subscribe(feed.Scope{AllOrgs: true}, 100)
	member := h.Subscribe(feed.Scope{OrgID: 1, UserID: 10}, 100)
	slow := h.Subscribe(feed.Scope{AllOrgs: true}, 1)
	closed := h.Subscribe(feed.Scope{AllOrgs: true}, 100)
	closed.Close()
	closed.Close() // idempotent

	const n = 20
	for i := 0; i < n; i++ {
		user := int64(10)
		if i%2 == 1 {
			user = 11
		}
		publish(t, d, ev(1, user, feed.TopicJob, fmt.Sprintf("e%d", i)))
	}
	got := receive(t, fast, n)
	for i, e := range got {
		if label(e) != fmt.Sprintf("e%d", i) {
			t.Fatalf("fast subscriber got %s at %d", label(e), i)
		}
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Fatalf("seq %d after %d", e.Seq, got[i-1].Seq)
		}
	}
	mine := receive(t, member, n/2)
	for _, e := range mine {
		if e.UserID != 10 {
			t.Fatalf("member subscription got user %d's event", e.UserID)
		}
	}
	// The slow one was dropped: its channel closes after what fitted, and it says so.
	var slowGot int
	for range slow.C {
		slowGot++
	}
	if !slow.Lagged() || slowGot >= n {
		t.Fatalf("slow subscriber: lagged %v after %d events", slow.Lagged(), slowGot)
	}
	if fast.Lagged() || member.Lagged() || closed.Lagged() {
		t.Fatal("a reading subscriber was marked lagged")
	}
	if _, ok := <-closed.C; ok {
		t.Fatal("a closed subscription received an event")
	}
	if h.Cursor() != got[len(got)-1].Seq {
		t.Fatalf("hub cursor %d, last delivered %d", h.Cursor(), got[len(got)-1].Seq)
	}
	// A lagged reader catches up from the table after its last seen seq.
	caughtUp := replay(t, d, got[0].Seq, all)
	if len(caughtUp) != n-1 {
		t.Fatalf("catch-up replay %d events, want %d", len(caughtUp), n-1)
	}
	// A subscriber added later gets only what commits afterwards.
	late := h.Subscribe(feed.Scope{AllOrgs: true}, 10)
	publish(t, d, ev(2, 20, feed.TopicOperation, "late"))
	if e := receive(t, late, 1)[0]; label(e) != "late" {
		t.Fatalf("late subscriber got %s", label(e))
	}
	if e := receive(t, fast, 1)[0]; label(e) != "late" {
		t.Fatalf("fast subscriber got %s", label(e))
	}
	// A fence in the member's scope: the hub delivers in order, so the member's next event is
	// the fence unless another org's event reached it first.
	publish(t, d, ev(1, 10, feed.TopicJob, "fence"))
	if e := receive(t, member, 1)[0]; label(e) != "fence" {
		t.Fatalf("member received %s (another org's event) before its fence", label(e))
	}
}

// TestReplayedPayloadIsOneCompactLine: PostgreSQL prints a jsonb payload with spaces (and a
// writer may send newlines); a reader gets it compacted to one line, as an SSE data line needs.
func TestReplayedPayloadIsOneCompactLine(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	e := ev(1, 1, feed.TopicJob, "x")
	e.Payload = json.RawMessage("{\n  \"label\": \"a b\",\n  \"n\": [1, 2]\n}")
	publish(t, d, e)
	sequence(t, d)
	got := replay(t, d, 0, all)
	if len(got) != 1 {
		t.Fatalf("%d events", len(got))
	}
	p := string(got[0].Payload)
	var m map[string]any
	if err := json.Unmarshal(got[0].Payload, &m); err != nil || m["label"] != "a b" || len(m["n"].([]any)) != 2 {
		t.Fatalf("payload %q: %v", p, err)
	}
	if strings.ContainsAny(p, "\n\r") || strings.Contains(p, ": ") || strings.Contains(p, ", ") {
		t.Fatalf("payload %q is not compact", p)
	}
}
