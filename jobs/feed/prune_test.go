package feed_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/jobs/feed"
)

// ageEvents dates the events numbered first..last two hours back.
func ageEvents(t *testing.T, d *dbtest.DB, first, last int) {
	t.Helper()
	if _, err := d.Bun.ExecContext(context.Background(),
		"UPDATE sa_event SET created_at = now() - interval '2 hours' WHERE seq BETWEEN ? AND ?", first, last); err != nil {
		t.Fatal(err)
	}
}

// keptSeqs lists the numbers of the events still kept, in order.
func keptSeqs(t *testing.T, d *dbtest.DB) []int64 {
	t.Helper()
	var seqs []int64
	if err := d.Bun.NewRaw("SELECT seq FROM sa_event WHERE seq IS NOT NULL ORDER BY seq").Scan(context.Background(), &seqs); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// Pruning deletes the events older than the retention, and only as a prefix of the numbers: an
// old event numbered after a young one stays until the young one is old too, so a replay from
// any kept number still finds every event after it. Unnumbered events are never pruned.
func TestPruneDeletesTheOldPrefixOfTheNumbers(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	seedFeed(t, d, 10)
	if _, err := d.Bun.ExecContext(ctx, `INSERT INTO sa_event (topic, org_id, user_id, payload, created_at)
		VALUES ('job', 1, 1, '{}', now() - interval '2 hours')`); err != nil {
		t.Fatal(err)
	}
	ageEvents(t, d, 1, 4)
	ageEvents(t, d, 6, 6)
	seqsFrom := func(a, b int64) []int64 {
		var out []int64
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
		return out
	}
	steps := []struct {
		name        string
		age         [2]int // events to date back before this prune, none when zero
		wantDeleted int64
		wantKept    []int64
	}{
		{"old events before the first young one", [2]int{}, 4, seqsFrom(5, 10)},
		{"the old one after it, once that is old", [2]int{5, 5}, 2, seqsFrom(7, 10)},
		{"every numbered event, when all are old", [2]int{7, 10}, 4, nil},
	}
	for _, s := range steps {
		if s.age[0] > 0 {
			ageEvents(t, d, s.age[0], s.age[1])
		}
		n, err := feed.Prune(ctx, d.Bun, time.Hour)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := keptSeqs(t, d); n != s.wantDeleted || !slices.Equal(got, s.wantKept) {
			t.Errorf("%s: deleted %d, kept %v; want %d deleted, %v kept", s.name, n, got, s.wantDeleted, s.wantKept)
		}
		if len(s.wantKept) > 0 {
			after := s.wantKept[0] - 1
			if _, err := feed.Replay(ctx, d.Bun, after, feed.Scope{AllOrgs: true}, 100); err != nil {
				t.Errorf("%s: replay after %d: %v", s.name, after, err)
			}
			if _, err := feed.Replay(ctx, d.Bun, after-1, feed.Scope{AllOrgs: true}, 100); !errors.Is(err, feed.ErrReplayGone) {
				t.Errorf("%s: replay after %d: %v, want ErrReplayGone", s.name, after-1, err)
			}
		}
	}
	var unnumbered int
	if err := d.Bun.NewRaw("SELECT count(*) FROM sa_event WHERE seq IS NULL").Scan(ctx, &unnumbered); err != nil {
		t.Fatal(err)
	}
	if unnumbered != 1 {
		t.Errorf("%d unnumbered events kept, want 1", unnumbered)
	}
}

// Pruning finds what to delete through the numbers' index, with and without statistics, and
// never reads the whole feed: the feed has no index on its creation time.
func TestPruneReadsTheNumbersIndex(t *testing.T) {
	t.Parallel()
	for _, analyzed := range []bool{false, true} {
		d := dbtest.New(t)
		ctx := context.Background()
		seedFeed(t, d, 20000)
		ageEvents(t, d, 1, 200)
		if analyzed {
			if _, err := d.Bun.ExecContext(ctx, "ANALYZE sa_event"); err != nil {
				t.Fatal(err)
			}
		}
		log := &queryLog{}
		d.Bun.AddQueryHook(log)
		n, err := feed.Prune(ctx, d.Bun, time.Hour)
		if err != nil || n != 200 {
			t.Fatalf("analyzed %v: pruned %d, %v; want 200", analyzed, n, err)
		}
		qs := log.all()
		if len(qs) != 2 {
			t.Fatalf("analyzed %v: prune ran %d statements, want 2: %q", analyzed, len(qs), qs)
		}
		for _, q := range qs {
			var lines []string
			if err := d.Bun.NewRaw("EXPLAIN (FORMAT TEXT) "+q).Scan(ctx, &lines); err != nil {
				t.Fatal(err)
			}
			whole := strings.Join(lines, "\n")
			if !strings.Contains(whole, "sa_event_seq_key") || strings.Contains(whole, "Seq Scan") {
				t.Errorf("analyzed %v: the prune's plan does not read sa_event_seq_key alone:\n%s\n%s", analyzed, q, whole)
			}
		}
	}
}
