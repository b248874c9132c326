package output_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/output"
)

// TestClosingStreamWaitsForNoOtherStreamsFlush: an execution that ends stores its last output
// while another execution's flush is still under way, and the one under way finishes once it
// can.
func TestClosingStreamWaitsForNoOtherStreamsFlush(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	a, b := newRunningJob(t, d, 0), newRunningJob(t, d, 0)

	// The flush that carries A's chunk is held inside the writer, after its statement, until
	// release closes: the longest a statement of another execution's flush could take.
	aHeld, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w, err := output.NewWriter(output.WriterConfig{DB: d.Bun, Logger: discard, Publish: func(cs []db.OutputChunk) {
		if slices.ContainsFunc(cs, func(c db.OutputChunk) bool { return c.JobID == a.ID }) {
			once.Do(func() { close(aHeld) })
			<-release
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := w.Open(a.ref()), w.Open(b.ref())
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	sa.Write("a")
	closedA := make(chan error, 1)
	go func() { closedA <- sa.Close(ctx) }()
	<-aHeld

	sb.Write("b")
	closedB := make(chan error, 1)
	go func() { closedB <- sb.Close(ctx) }()
	select {
	case err := <-closedB:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("closing B waited for the flush of A's chunk")
	}
	if got := texts(stored(t, d, b)); strings.Join(got, "|") != "b" {
		t.Errorf("B stored %q, want b", got)
	}
	select {
	case err := <-closedA:
		t.Fatalf("A closed while its flush was held: %v", err)
	default:
	}

	close(release)
	if err := <-closedA; err != nil {
		t.Fatal(err)
	}
	if got := texts(stored(t, d, a)); strings.Join(got, "|") != "a" {
		t.Errorf("A stored %q, want a", got)
	}
}
