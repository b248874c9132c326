package intake

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

// TestConfigValidate: the zero value of every field means its default; a bad value is an
// error, never clamped.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	in, err := New(Config{})
	if err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if c := in.cfg; c.Yield != 0 || c.LaneWidth != max(runtime.GOMAXPROCS(0)/2, 1) || c.GroupWriters != 4 || c.GroupMax != 32 || c.Solo {
		t.Fatalf("defaults: %+v", c)
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"negative yield":   {Config{Yield: -time.Second}, "Yield"},
		"negative width":   {Config{LaneWidth: -1}, "LaneWidth"},
		"negative writers": {Config{GroupWriters: -1}, "GroupWriters"},
		"negative max":     {Config{GroupMax: -2}, "GroupMax"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error naming %q", name, err, tc.want)
		}
	}
}

// TestSoloGroupSendsEveryRequestAlone: with group commit switched off, a request never waits
// for a writer nor shares a transaction: it goes straight to Alone, even while every writer
// is held.
func TestSoloGroupSendsEveryRequestAlone(t *testing.T) {
	t.Parallel()
	in, err := New(Config{Solo: true})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGroup(in, GroupSpec[int, int]{
		Write: func(context.Context, bun.Tx, []*Wait[int, int], []Outcome[int]) error {
			t.Error("a solo group wrote a shared transaction")
			return nil
		},
		Alone: func(_ context.Context, n int) (int, error) { return n * 2, nil },
		InTx: func(context.Context, func(context.Context, bun.Tx) error) error {
			t.Error("a solo group opened a shared transaction")
			return nil
		},
		What: "double",
	})
	g.Hold()
	if got, err := g.Do(context.Background(), 21); err != nil || got != 42 {
		t.Fatalf("Do(21) = %d, %v; want 42 from Alone", got, err)
	}
	if n := g.Waiting(); n != 0 {
		t.Fatalf("%d requests waiting in a solo group", n)
	}
}
