package governor_test

import (
	"context"
	"fmt"
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

// TestUnlimitedModelAlwaysGrantsAtOnce: a model with no limit is granted every call at once,
// without the row lock: while another transaction holds the model's row, a reservation is still
// granted. Each call reaches the model's count within CountEvery.
func TestUnlimitedModelAlwaysGrantsAtOnce(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	g := newGovernor(t, d, governor.Config{})
	for i := 0; i < 20; i++ {
		if gr := reserve(t, g, "m", 100); !gr.Granted || gr.Wait != 0 {
			t.Fatalf("reservation %d: %+v", i, gr)
		}
	}
	tx, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM sa_governor WHERE model = 'm' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// A reservation that queued on the lock would wait for the rollback below forever; the
	// deadline turns that into a failure.
	lockedCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if gr, err := g.Reserve(lockedCtx, "m", 100); err != nil || !gr.Granted {
		t.Fatalf("reservation while the row is locked: %+v, %v; want granted by a read", gr, err)
	}
	_ = tx.Rollback()
	dbtest.WaitForDetail(t, 30*time.Second, "21 calls counted", func() (bool, string) {
		states, err := g.Models(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(states) == 1 && states[0].Model == "m" && states[0].Calls == 21, fmt.Sprintf("states %+v", states)
	})
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
		mu         sync.Mutex
		all, ahead []time.Time
		wg         sync.WaitGroup
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
				if gr.Wait > 0 {
					ahead = append(ahead, gr.At)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	limit := int(math.Ceil(rpm*10.0/60)) + 2
	if got := maxInWindow(all, 10*time.Second); got > limit {
		t.Errorf("%d starts in a 10 s window, limit %d", got, limit)
	}
	// The slots are used: a slot reserved ahead of its time follows the slot before it by one
	// interval (10 ms at 6,000 a minute), never more. Comparing the whole span with 16 s instead
	// would time the reservations themselves, which a loaded machine slows down.
	sort.Slice(ahead, func(i, j int) bool { return ahead[i].Before(ahead[j]) })
	for _, at := range ahead {
		i := sort.Search(len(all), func(i int) bool { return !all[i].Before(at) })
		if i > 0 && at.Sub(all[i-1]) > 10*time.Millisecond+time.Microsecond {
			t.Errorf("a slot reserved ahead comes %v after the slot before it, want at most 10 ms", at.Sub(all[i-1]))
		}
	}
	if got := maxInWindow(all, time.Nanosecond); got > governor.Burst {
		t.Errorf("%d calls start at once, burst is %d", got, governor.Burst)
	}
}

func TestHorizonRefusesAndSaysWhenToAskAgain(t *testing.T) {
	t.Parallel()
	g := newGovernor(t, dbtest.New(t), governor.Config{RPM: 60, Horizon: 2 * time.Second})
	var fourth governor.Grant
	for i := 0; i < 4; i++ { // slots at 0, 0 (burst), 1 s, 2 s
		if fourth = reserve(t, g, "m", 1); !fourth.Granted {
			t.Fatalf("reservation %d refused: %+v", i, fourth)
		}
	}
	// The slot at 3 s is beyond the 2 s horizon: asking again is worth it once it comes within,
	// which is at most a second away (less the time the reservations themselves took).
	gr := reserve(t, g, "m", 1)
	if gr.Granted || gr.Wait <= 0 || gr.Wait > time.Second {
		t.Errorf("fifth reservation %+v, want refused with at most 1 s to wait", gr)
	}
	if !fourth.At.IsZero() && !gr.At.IsZero() && fourth.Wait > 0 && gr.At.Sub(fourth.At) != time.Second {
		t.Errorf("the refused slot is %v after the last granted one, want 1 s", gr.At.Sub(fourth.At))
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
			// The pause counts from the database's clock while Observe runs, which lies between
			// before and after; the first slot is the pause's end.
			before := time.Now().Add(-time.Millisecond)
			if err := g.Observe(ctx, model, tt.obs); err != nil {
				t.Fatal(err)
			}
			after := time.Now().Add(time.Millisecond)
			gr := reserve(t, g, model, 1)
			if !gr.Granted || gr.Wait > tt.wantWait || gr.At.Before(before.Add(tt.wantWait)) || gr.At.After(after.Add(tt.wantWait)) {
				t.Errorf("after %s: %+v, want the slot %v after the observation (between %v and %v)",
					tt.name, gr, tt.wantWait, before.Add(tt.wantWait), after.Add(tt.wantWait))
			}
		})
	}
	t.Run("limit learned from the provider", func(t *testing.T) {
		g := newGovernor(t, d, governor.Config{Horizon: time.Minute})
		if err := g.Observe(ctx, "learned", governor.Observation{Limits: provider.Limits{HasLimitRequests: true, LimitRequests: 60}}); err != nil {
			t.Fatal(err)
		}
		var gs [4]governor.Grant // slots at 0, 0 (burst), 1 s, 2 s
		for i := range gs {
			gs[i] = reserve(t, g, "learned", 1)
		}
		// Two slots both reserved ahead of their time are one interval apart; one reserved late
		// (a slow machine) is now, and only not sooner than the interval allows.
		gap := gs[3].At.Sub(gs[2].At)
		if gs[2].Wait > 0 && gs[3].Wait > 0 && gap != time.Second || gap < 0 {
			t.Errorf("slots %v apart (%+v, %+v), want 1 s at a learned 60 per minute", gap, gs[2], gs[3])
		}
		if gs[3].Wait > time.Second*2 {
			t.Errorf("fourth slot %+v, want at most 2 s away", gs[3])
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
	var first, last governor.Grant
	for i := 0; i < 3; i++ {
		last = reserve(t, g, "m", 500) // 1,500 tokens: the first three fit in ten seconds' worth
		if i == 0 {
			first = last
		}
	}
	if !last.Granted || last.Wait > 0 {
		t.Fatalf("third reservation %+v, want at once", last)
	}
	// The fourth's tokens are owed from 5 s after the first slot: that slot, or later if the
	// reservations themselves took that long.
	next := reserve(t, g, "m", 500)
	if gap := next.At.Sub(first.At); !next.Granted || gap < 5*time.Second || next.Wait > 0 && gap != 5*time.Second {
		t.Errorf("fourth reservation %+v, %v after the first, want 5 s after it", next, gap)
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
	var first governor.Grant
	for i := 0; i < 3; i++ {
		gr := reserve(t, g, "m", 500)
		if !gr.Granted || gr.Wait > 0 {
			t.Fatalf("reservation %d: %+v, want at once", i, gr)
		}
		if i == 0 {
			first = gr
		}
	}
	// 1,000 tokens more than reserved are ten seconds at 100 a second: the next slot is 15 s
	// after the first (5 s of its own tokens and the 10 s of debt), or later on a slow machine.
	if err := g.Observe(ctx, "m", governor.Observation{ReservedTokens: 500, UsedTokens: 1500}); err != nil {
		t.Fatal(err)
	}
	next := reserve(t, g, "m", 500)
	if gap := next.At.Sub(first.At); !next.Granted || gap < 15*time.Second || next.Wait > 0 && gap != 15*time.Second {
		t.Errorf("reservation after the debt %+v, %v after the first, want 15 s after it", next, gap)
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
		{"reserve counting by read", "SELECT granted FROM asterion_governor_reserve('m', 60, 0, 1, 2, 2, true)"},
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
