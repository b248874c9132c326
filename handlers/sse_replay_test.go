package handlers

import (
	"context"
	"testing"
	"time"

	"asterion/identity"
)

// A Last-Event-ID older than the retained feed gets a fresh snapshot (the jobs as they are now,
// without ids) and then the high mark as the stream's id, instead of a replay with a hole; live
// events follow.
func TestMissionEventsSnapshotForAPrunedLastEventID(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "returner", identity.RoleMember)
	first := f.submit(t, u, "before the gap")
	f.waitJob(t, u, first.JobID, "succeeded")
	f.waitSequenced(t)
	ctx := context.Background()
	var mark int64
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT last_seq FROM sa_event_cursor").Scan(&mark); err != nil {
		t.Fatal(err)
	}
	// The retention pass removed everything numbered so far.
	if _, err := f.DB.Bun.ExecContext(ctx, "DELETE FROM sa_event WHERE seq IS NOT NULL"); err != nil {
		t.Fatal(err)
	}
	s := f.openMission(t, u, "Last-Event-ID", "1")
	deadline := time.Now().Add(10 * time.Second)
	e, ok := s.next(time.Until(deadline))
	if !ok || e.Comment == "" {
		t.Fatalf("first after connect: %+v (ok %v), want the snapshot comment", e, ok)
	}
	e, ok = s.nextEvent(deadline)
	if !ok || e.HasID || e.Name != "job.state_changed" {
		t.Fatalf("snapshot event %+v (ok %v): want job.state_changed without an id", e, ok)
	}
	if d := mustDecode[jobEventData](t, []byte(e.Data)); d.JobID != first.JobID || d.State != "succeeded" {
		t.Errorf("snapshot of job %s: %+v, want it succeeded", first.JobID, d)
	}
	e, ok = s.nextEvent(deadline)
	if !ok || !e.HasID || e.ID < mark || e.Data != "" {
		t.Fatalf("after the snapshot: %+v (ok %v), want the id line of the high mark %d", e, ok, mark)
	}
	second := f.submit(t, u, "after the gap")
	for {
		e, ok = s.nextEvent(deadline)
		if !ok {
			t.Fatal("no live event after the snapshot")
		}
		if d := jobEvent(t, e); d.JobID == second.JobID {
			if e.ID <= mark {
				t.Errorf("live event id %d not after the high mark %d", e.ID, mark)
			}
			return
		}
	}
}
