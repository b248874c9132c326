package feed

import (
	"context"
	"encoding/json"
	"testing"

	"asterion/db"
	"asterion/db/dbtest"
)

// TestSequencerCostDoesNotGrowWithNumberedEvents: on a database that was never analysed or
// vacuumed (a new install, or autovacuum off), once thousands of events have been numbered, the
// sequencer finds the unnumbered ones with an index scan, which marks the dead versions it meets
// so later runs skip them, never with a bitmap or sequential scan, which visits every event
// numbered since the last VACUUM on every run (and it runs after nearly every commit).
func TestSequencerCostDoesNotGrowWithNumberedEvents(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	const events = 3000
	payload, _ := json.Marshal(map[string]string{"label": "x"})
	for done := 0; done < events; done += 500 {
		b := db.NewBatch(d.Bun)
		for range 500 {
			b.Insert(Row(Event{Topic: TopicJob, OrgID: 1, UserID: 1, Payload: payload}).InsertStatement())
		}
		if err := b.Exec(ctx, d.Bun); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Sequence(ctx, d.Pool); err != nil {
			t.Fatal(err)
		}
	}
	// The first scans after the numbering find the old versions dead and mark them so; what is
	// measured is the steady state of a sequencer that runs again and again.
	for range 2 {
		if _, _, err := Sequence(ctx, d.Pool); err != nil {
			t.Fatal(err)
		}
	}
	// The sequencer's own transaction, with its numbering explained.
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, lockSequencer, sequencerLock); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sequenceEvents, eventsChannel).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plan []struct{ Plan planNode }
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("read plan %s: %v", raw, err)
	}
	for _, n := range plan[0].Plan.walk() {
		if n.Relation == "sa_event" && (n.Type == "Seq Scan" || n.Type == "Bitmap Heap Scan") {
			t.Fatalf("the sequencer reads sa_event with a %s, which visits every event numbered since the last VACUUM "+
				"(%d pages here after %d events); plan: %s", n.Type, n.Hit+n.Read, events, raw)
		}
	}
}

// planNode is one node of an EXPLAIN (FORMAT JSON) plan, with what the test reads of it.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Hit      int        `json:"Shared Hit Blocks"`
	Read     int        `json:"Shared Read Blocks"`
	Plans    []planNode `json:"Plans"`
}

// walk lists n and every node under it.
func (n planNode) walk() []planNode {
	out := []planNode{n}
	for _, c := range n.Plans {
		out = append(out, c.walk()...)
	}
	return out
}
