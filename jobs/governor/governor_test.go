package governor_test

import (
	"context"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/jobs/governor"
	"asterion/jobs/provider"
)

func newGovernor(t *testing.T, d *dbtest.DB, cfg governor.Config) *governor.Governor {
	t.Helper()
	cfg.DB = d.Bun
	g, err := governor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func reserve(t *testing.T, g *governor.Governor, model string, tokens int) governor.Grant {
	t.Helper()
	gr, err := g.Reserve(context.Background(), model, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return gr
}

func TestUnlimitedModelAlwaysGrantsAtOnce(t *testing.T) {
	t.Parallel()
	g := newGovernor(t, dbtest.New(t), governor.Config{})
	for i := 0; i < 20; i++ {
		if gr := reserve(t, g, "m", 100); !gr.Granted || gr.Wait != 0 {
			t.Fatalf("reservation %d: %+v", i, gr)
		}
	}
	states, err := g.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0].Model != "m" || states[0].Calls != 20 {
		t.Errorf("states %+v, want model m with 20 calls counted", states)
	}
}

// starts reserves n slots and returns their start times on the database's clock, failing when
// one is refused.
func starts(t *testing.T, g *governor.Governor, model string, n int) []time.Time {
	t.Helper()
	out := make([]time.Time, 0, n)
	for i := 0; i < n; i++ {
		gr := reserve(t, g, model, 1)
		if !gr.Granted {
			t.Fatalf("reservation %d refused: %+v", i, gr)
		}
		out = append(out, gr.At)
	}
	return out
}

// maxInWindow is the most starts within any window of w.
func maxInWindow(ts []time.Time, w time.Duration) int {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// TestWindowBound: with RPM configured, no window of 10 s holds more than
// ceil(RPM × 10 / 60) + 2 starts, across two governors (two processes) reserving at once.
func TestWindowBound(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	const rpm = 6000
	cfg := governor.Config{RPM: rpm, Horizon: time.Minute}
	a, b := newGovernor(t, d, cfg), newGovernor(t, d, cfg)
	var (
		mu  sync.Mutex
		all []time.Time
		wg  sync.WaitGroup
	)
	for _, g := range []*governor.Governor{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				gr, err := g.Reserve(context.Background(), "gpt", 1)
				if err != nil || !gr.Granted {
					t.Errorf("reservation %d: %+v %v", i, gr, err)
					return
				}
				mu.Lock()
				all = append(all, gr.At)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	limit := int(math.Ceil(rpm*10.0/60)) + 2
	if got := maxInWindow(all, 10*time.Second); got > limit {
		t.Errorf("%d starts in a 10 s window, limit %d", got, limit)
	}
	// The slots are used: 1,600 calls at 100/s span about 16 s, not much more.
	if span := all[len(all)-1].Sub(all[0]); span > 16*time.Second+2*time.Second {
		t.Errorf("1,600 slots span %v, want about 16 s", span)
	}
	if got := maxInWindow(all, time.Nanosecond); got > governor.Burst {
		t.Errorf("%d calls start at once, burst is %d", got, governor.Burst)
	}
}

func TestHorizonRefusesAndSaysWhenToAskAgain(t *testing.T) {
	t.Parallel()
	g := newGovernor(t, dbtest.New(t), governor.Config{RPM: 60, Horizon: 2 * time.Second})
	for i := 0; i < 4; i++ { // slots at 0, 0 (burst), 1 s, 2 s
		if gr := reserve(t, g, "m", 1); !gr.Granted {
			t.Fatalf("reservation %d refused: %+v", i, gr)
		}
	}
	gr := reserve(t, g, "m", 1) // slot at 3 s is beyond the 2 s horizon
	if gr.Granted || gr.Wait < 900*time.Millisecond || gr.Wait > time.Second {
		t.Errorf("fifth reservation %+v, want refused with about 1 s to wait", gr)
	}
}

func TestObservationsPauseAndTeach(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		obs      governor.Observation
		wantWait time.Duration
	}{
		{"429 with Retry-After", governor.Observation{RateLimited: true, RetryAfter: 3 * time.Second, HasRetryAfter: true}, 3 * time.Second},
		{"no requests remaining", governor.Observation{Limits: provider.Limits{HasRemainingRequests: true, RemainingRequests: 0,
			ResetRequests: 4 * time.Second}}, 4 * time.Second},
		{"no tokens remaining", governor.Observation{Limits: provider.Limits{HasRemainingTokens: true, RemainingTokens: 0,
			ResetTokens: 5 * time.Second}}, 5 * time.Second},
	}
	t.Run("429 without Retry-After pauses nobody", func(t *testing.T) {
		g := newGovernor(t, d, governor.Config{Horizon: time.Minute})
		if err := g.Observe(ctx, "bare-429", governor.Observation{RateLimited: true}); err != nil {
			t.Fatal(err)
		}
		if gr := reserve(t, g, "bare-429", 1); !gr.Granted || gr.Wait != 0 {
			t.Errorf("after a bare 429: %+v, want a slot at once", gr)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGovernor(t, d, governor.Config{Horizon: time.Minute})
			model := "m-" + tt.name
			if err := g.Observe(ctx, model, tt.obs); err != nil {
				t.Fatal(err)
			}
			gr := reserve(t, g, model, 1)
			if !gr.Granted || gr.Wait > tt.wantWait || gr.Wait < tt.wantWait-time.Second {
				t.Errorf("after %s: %+v, want a slot about %v away", tt.name, gr, tt.wantWait)
			}
		})
	}
	t.Run("limit learned from the provider", func(t *testing.T) {
		g := newGovernor(t, d, governor.Config{Horizon: time.Minute})
		if err := g.Observe(ctx, "learned", governor.Observation{Limits: provider.Limits{HasLimitRequests: true, LimitRequests: 60}}); err != nil {
			t.Fatal(err)
		}
		ts := starts(t, g, "learned", 4) // 0, 0, 1 s, 2 s
		if gap := ts[3].Sub(ts[2]); gap < 900*time.Millisecond || gap > 1100*time.Millisecond {
			t.Errorf("slots %v apart, want 1 s at a learned 60 per minute", gap)
		}
		states, err := g.Models(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if s.Model == "learned" && (g.RPM(s) != 60 || s.Calls != 4) {
				t.Errorf("state %+v: RPM %d", s, g.RPM(s))
			}
		}
	})
}

func TestTokenLimitPacesByTokens(t *testing.T) {
	t.Parallel()
	// 6,000 tokens a minute is 100 a second; ten seconds of tokens may go at once.
	g := newGovernor(t, dbtest.New(t), governor.Config{TPM: 6000, Horizon: time.Minute})
	var last governor.Grant
	for i := 0; i < 3; i++ {
		last = reserve(t, g, "m", 500) // 1,500 tokens: the first three fit in ten seconds' worth
	}
	if !last.Granted || last.Wait > 100*time.Millisecond {
		t.Fatalf("third reservation %+v, want at once", last)
	}
	next := reserve(t, g, "m", 500)
	if !next.Granted || next.Wait < 4*time.Second || next.Wait > 5*time.Second+100*time.Millisecond {
		t.Errorf("fourth reservation %+v, want about 5 s away", next)
	}
	// A call that used fewer tokens than reserved gives them back.
	if err := g.Observe(context.Background(), "m", governor.Observation{ReservedTokens: 500, UsedTokens: 100}); err != nil {
		t.Fatal(err)
	}
	refunded := reserve(t, g, "m", 1)
	if refunded.Wait >= next.Wait+time.Second {
		t.Errorf("after a refund the wait is %v, before it %v", refunded.Wait, next.Wait)
	}
}

// TestLearnedTokenLimitChargesTheDebt: with no token limit configured, a call that used more
// tokens than its slot reserved still pushes the next slot back once the provider has
// reported a token limit.
func TestLearnedTokenLimitChargesTheDebt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGovernor(t, dbtest.New(t), governor.Config{Horizon: time.Minute})
	if err := g.Observe(ctx, "m", governor.Observation{Limits: provider.Limits{HasLimitTokens: true, LimitTokens: 6000}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if gr := reserve(t, g, "m", 500); !gr.Granted || gr.Wait > 100*time.Millisecond {
			t.Fatalf("reservation %d: %+v, want at once", i, gr)
		}
	}
	// 1,000 tokens more than reserved are ten seconds at 100 a second.
	if err := g.Observe(ctx, "m", governor.Observation{ReservedTokens: 500, UsedTokens: 1500}); err != nil {
		t.Fatal(err)
	}
	next := reserve(t, g, "m", 500)
	if !next.Granted || next.Wait < 14*time.Second || next.Wait > 15*time.Second+100*time.Millisecond {
		t.Errorf("reservation after the debt %+v, want about 15 s away", next)
	}
}

// TestReservationsCommitWithoutWaitingForTheFlush: the model's row lock is held until commit,
// so a reservation that waited for its WAL flush would hold every other worker's call start
// behind the disk.
func TestReservationsCommitWithoutWaitingForTheFlush(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	for _, tt := range []struct{ name, query string }{
		{"reserve", "SELECT granted FROM asterion_governor_reserve('m', 0, 0, 1, 2, 2)"},
		{"observe", "SELECT asterion_governor_observe('m', 60, 0, 0, 0, 0, false)"},
		{"observe bounded", "SELECT asterion_governor_observe('m', 60, 0, 0, 0, 0, false, 300)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := d.Bun.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, tt.query); err != nil {
				t.Fatal(err)
			}
			var setting string
			if err := tx.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
				t.Fatal(err)
			}
			if setting != "off" {
				t.Errorf("synchronous_commit after %s is %q, want off for its transaction", tt.name, setting)
			}
		})
	}
}

func TestOperatorPause(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	g, other := newGovernor(t, d, governor.Config{}), newGovernor(t, d, governor.Config{})
	if err := g.Pause(ctx, "m", governor.Pauser{Role: governor.RoleAdmin, Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	if gr := reserve(t, other, "m", 1); gr.Granted || !gr.Paused {
		t.Errorf("paused model: %+v", gr)
	}
	if gr := reserve(t, other, "n", 1); !gr.Granted {
		t.Errorf("another model: %+v", gr)
	}
	if err := g.Resume(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if gr := reserve(t, other, "m", 1); !gr.Granted || gr.Paused {
		t.Errorf("resumed model: %+v", gr)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	for _, cfg := range []governor.Config{
		{},
		{DB: d.Bun, RPM: -1},
		{DB: d.Bun, TPM: -5},
		{DB: d.Bun, Horizon: -time.Second},
		{DB: d.Bun, Horizon: 2 * time.Minute},
		{DB: d.Bun, MaxPause: -time.Second},
		{DB: d.Bun, MaxPause: 25 * time.Hour},
	} {
		if _, err := governor.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
