package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"asterion/jobs"
)

// TestDashboardOperationsStream: a snapshot on connect, new rows prepended, changed rows
// swapped out of band, counts following, nothing of another org.
func TestDashboardOperationsStream(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	s := openDashStream(t, e, f.opA, "/admin/deferred-operations/events")
	snap := s.next(t, 5*time.Second)
	if snap.name != "snapshot" || !strings.Contains(snap.data, `id="ops-list"`) || !strings.Contains(snap.data, `hx-swap-oob="true"`) ||
		!strings.Contains(snap.data, `<tr id="op-`+f.opIDA) {
		t.Fatalf("first event %q is not the snapshot of the page:\n%.2000s", snap.name, snap.data)
	}
	meta := s.next(t, 5*time.Second)
	if meta.name != "meta" || !strings.Contains(meta.data, `id="ops-counts"`) {
		t.Fatalf("second event %q is not the counts", meta.name)
	}
	// Org B's new operation never shows; org A's is prepended.
	subB := e.submit(t, f.opB, "other org")
	subA := e.submit(t, f.member, "new")
	newID := subA.Operation.OperationID.String()
	ev := s.waitFor(t, "the new row", 10*time.Second, func(ev dashEvent) bool {
		if strings.Contains(ev.data, subB.Operation.OperationID.String()) {
			t.Fatalf("org B's operation reached org A's stream: %s", ev.data)
		}
		return ev.name == "row" && strings.Contains(ev.data, newID)
	})
	wantContains(t, ev.data, `hx-swap-oob="afterbegin:#ops-rows"`, "prepend")
	wantContains(t, ev.data, `data-status="pending"`, "new row status")
	// A change of a shown row is an out-of-band swap of that row.
	if _, err := e.Jobs.Cancel(context.Background(), f.opA.viewer, subA.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	ev = s.waitFor(t, "the cancelled row", 10*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, `<tr id="op-`+newID+`"`) && strings.Contains(ev.data, `data-status="cancelled"`)
	})
	wantContains(t, ev.data, `hx-swap-oob="true"`, "row swap")
	s.waitFor(t, "updated counts", 5*time.Second, func(ev dashEvent) bool {
		return ev.name == "meta" && strings.Contains(ev.data, `data-count="cancelled"`)
	})

	// A filtered stream: a row that stops matching is marked stale; new non-matching rows stay out.
	s2 := openDashStream(t, e, f.opA, "/admin/deferred-operations/events?status=pending")
	s2.next(t, 5*time.Second)
	if _, err := e.Jobs.Cancel(context.Background(), f.opA.viewer, f.subA.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	ev = s2.waitFor(t, "stale row", 10*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, f.opIDA)
	})
	wantContains(t, ev.data, "data-stale", "stale marker")

	// The detail stream says "changed" on connect and when the operation changes.
	d := openDashStream(t, e, f.opA, "/admin/deferred-operations/"+f.opIDA+"/events")
	if ev := d.next(t, 5*time.Second); ev.name != "changed" {
		t.Fatalf("detail stream first event %q", ev.name)
	}
	if _, err := e.Jobs.Retry(context.Background(), f.opA.viewer, f.subA.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "changed after retry", 5*time.Second, func(ev dashEvent) bool { return ev.name == "changed" })
}
