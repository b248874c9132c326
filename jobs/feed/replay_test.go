package feed_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"asterion/db/dbtest"
	"asterion/jobs/feed"
)

// seedFeed numbers n events spread over 10 orgs of 10 users each, straight in SQL.
func seedFeed(t *testing.T, d *dbtest.DB, n int) {
	t.Helper()
	if _, err := d.Bun.ExecContext(context.Background(), `WITH ins AS (
		INSERT INTO sa_event (seq, topic, org_id, user_id, payload)
		SELECT g, 'job', g % 10, g % 100, '{"label":"x"}'::jsonb FROM generate_series(1, ?) AS g RETURNING seq)
		UPDATE sa_event_cursor SET last_seq = (SELECT max(seq) FROM ins) WHERE id = 1`, n); err != nil {
		t.Fatal(err)
	}
}

// A scoped replay from the start of a large feed reads its scope's index, never the feed's seq
// order filtered: the plan of the very query Replay runs reads the scope's index and no other,
// before and after the planner has statistics, even for an org holding a tenth of the feed.
func TestReplayUsesTheScopeIndex(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	seedFeed(t, d, 20000)
	lq := &queryLog{}
	d.Bun.AddQueryHook(lq)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := d.Bun.ExecContext(ctx, "ANALYZE sa_event"); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			scope feed.Scope
			index string
			want  int
		}{
			{feed.Scope{OrgID: 3, UserID: 53, Topics: []string{feed.TopicJob}}, "idx_event_org_user_seq", 200},
			{feed.Scope{OrgID: 3}, "idx_event_org_seq", 500},
		} {
			evs, err := feed.Replay(ctx, d.Bun, 1, c.scope, 500)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != c.want {
				t.Errorf("scope %+v replayed %d events, want %d", c.scope, len(evs), c.want)
			}
			for i, e := range evs {
				if e.OrgID != c.scope.OrgID || (c.scope.UserID != 0 && e.UserID != c.scope.UserID) || (i > 0 && e.Seq <= evs[i-1].Seq) {
					t.Fatalf("event %+v out of scope %+v or out of order", e, c.scope)
				}
			}
			q := lq.last()
			var lines []string
			if err := d.Bun.NewRaw("EXPLAIN (FORMAT TEXT) "+q).Scan(ctx, &lines); err != nil {
				t.Fatal(err)
			}
			whole := strings.Join(lines, "\n")
			if !strings.Contains(whole, c.index) || strings.Contains(whole, "sa_event_seq_key") || strings.Contains(whole, "Seq Scan") {
				t.Errorf("analyzed %v, scope %+v: the replay's plan does not read %s alone:\n%s\n%s", analyzed, c.scope, c.index, q, whole)
			}
		}
	}
}

// A replay from before the oldest kept event, or past the feed's end, is refused with
// ErrReplayGone; from the event just before the oldest kept one it works.
func TestReplayFromPrunedEventsIsGone(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	scope := feed.Scope{OrgID: 1, UserID: 1}
	if _, err := feed.Replay(ctx, d.Bun, 0, scope, 10); err != nil {
		t.Fatalf("replay of an empty feed: %v", err)
	}
	seedFeed(t, d, 100)
	if _, err := d.Bun.ExecContext(ctx, "DELETE FROM sa_event WHERE seq <= 40"); err != nil {
		t.Fatal(err)
	}
	for after, gone := range map[int64]bool{0: true, 1: true, 39: true, 40: false, 41: false, 100: false, 101: true} {
		_, err := feed.Replay(ctx, d.Bun, after, scope, 10)
		if gone != errors.Is(err, feed.ErrReplayGone) || (!gone && err != nil) {
			t.Errorf("replay after %d: %v, want gone %v", after, err, gone)
		}
	}
	if _, err := d.Bun.ExecContext(ctx, "DELETE FROM sa_event"); err != nil {
		t.Fatal(err)
	}
	if _, err := feed.Replay(ctx, d.Bun, 100, scope, 10); err != nil {
		t.Errorf("replay from the high mark of a pruned-empty feed: %v", err)
	}
	if _, err := feed.Replay(ctx, d.Bun, 99, scope, 10); !errors.Is(err, feed.ErrReplayGone) {
		t.Errorf("replay from before the high mark of a pruned-empty feed: %v, want ErrReplayGone", err)
	}
}
