package eta

import (
	"testing"
	"time"

	"github.com/uptrace/bun"
)

func testEstimator(t *testing.T, cfg Config) *Estimator {
	t.Helper()
	cfg.DB = &bun.DB{}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil {
		t.Error("an estimator without a database was accepted")
	}
	if _, err := New(Config{DB: &bun.DB{}, CountCap: -1}); err == nil {
		t.Error("a negative count cap was accepted")
	}
	e := testEstimator(t, Config{})
	if e.cfg.DefaultRun != 2*time.Second || e.cfg.CacheFor != time.Second || e.cfg.CountCap != 2000 {
		t.Errorf("defaults %+v", e.cfg)
	}
}

// TestETAModel: the drain rate is capacity over the mean run time, never below the rate
// measured over the last minute, never above the provider's RPM; an org cap bounds its org's.
func TestETAModel(t *testing.T) {
	t.Parallel()
	e := testEstimator(t, Config{})
	busy := rateSample{running: 10, meanRun: time.Second}
	if m := e.modelOf(busy, 0); m.capacity != 10 || m.free != 0 || m.rate != 10 {
		t.Errorf("ten running one-second jobs: %+v", m)
	}
	// A burst just submitted: nothing runs yet, but this process runs ten workers.
	e.AddWorkers(10)
	if m := e.modelOf(rateSample{meanRun: time.Second}, 0); m.capacity != 10 || m.free != 10 || m.rate != 10 {
		t.Errorf("ten idle local workers: %+v", m)
	}
	e.AddWorkers(-10)
	// The peak of the last minute stands in for workers of other processes seen busy.
	if m := e.modelOf(rateSample{running: 2, meanRun: 2 * time.Second}, 8); m.capacity != 8 || m.free != 6 || m.rate != 4 {
		t.Errorf("two running after a peak of eight: %+v", m)
	}
	// Measured finishes raise a rate that the snapshot of running jobs underestimates.
	if m := e.modelOf(rateSample{running: 1, meanRun: time.Second, finished: 600}, 0); m.rate != 10 {
		t.Errorf("600 finished in a minute: rate %v, want 10/s", m.rate)
	}
	// Nothing finished yet: the default run time, or what the oldest running job already took.
	if m := e.modelOf(rateSample{running: 1}, 0); m.meanRun != 2*time.Second {
		t.Errorf("no history: mean run %v", m.meanRun)
	}
	if m := e.modelOf(rateSample{running: 1, oldest: 5 * time.Second}, 0); m.meanRun != 5*time.Second {
		t.Errorf("no history, a job running 5 s: mean run %v", m.meanRun)
	}
	capped := testEstimator(t, Config{ProviderRPM: 60, OrgMaxRunning: 2})
	m := capped.modelOf(busy, 0)
	if m.rate != 1 || m.orgRate != 1 {
		t.Errorf("60 RPM: %+v", m)
	}
	org := testEstimator(t, Config{OrgMaxRunning: 2})
	if m := org.modelOf(busy, 0); m.rate != 10 || m.orgRate != 2 {
		t.Errorf("org cap 2 of one-second jobs: %+v", m)
	}
}

func TestETAQueuedWait(t *testing.T) {
	t.Parallel()
	m := etaModel{meanRun: time.Second, capacity: 10, free: 3, rate: 10}
	for _, c := range []struct {
		ahead, aheadOrg int
		want            time.Duration
	}{
		{0, 0, 0},                      // a free worker takes it
		{2, 0, 0},                      // still a free worker left
		{3, 0, 100 * time.Millisecond}, // first to go when a running job ends
		{102, 0, 10 * time.Second},     // a hundred ahead of its turn at 10/s
		{102, 50, 10 * time.Second},    // no org cap
	} {
		if got := m.queuedWait(c.ahead, c.aheadOrg); got != c.want {
			t.Errorf("ahead %d (org %d): %v, want %v", c.ahead, c.aheadOrg, got, c.want)
		}
	}
	m.orgRate = 2
	if got := m.queuedWait(10, 40); got != 20*time.Second {
		t.Errorf("40 of its org's jobs ahead at 2/s: %v", got)
	}
	if got := m.runningLeft(300 * time.Millisecond); got != time.Second {
		t.Errorf("running 0.3 s of a 1 s mean: %v left, want the 1 s floor", got)
	}
	m.meanRun = 10 * time.Second
	if got := m.runningLeft(4 * time.Second); got != 6*time.Second {
		t.Errorf("running 4 s of a 10 s mean: %v left", got)
	}
}

func TestETAExtrapolate(t *testing.T) {
	t.Parallel()
	s := rateSample{queued: 10000, oldestQueued: 100 * time.Second, queuedRead: true}
	if got := extrapolate(2000, s, 50*time.Second); got != 5000 {
		t.Errorf("half the queue's age: %d, want 5000", got)
	}
	if got := extrapolate(2000, s, 0); got != 10000 {
		t.Errorf("just submitted: %d, want the whole queue ahead", got)
	}
	if got := extrapolate(2000, s, 95*time.Second); got != 2000 {
		t.Errorf("near the front: %d, want the bound", got)
	}
	if got := extrapolate(2000, s, time.Hour); got != 2000 {
		t.Errorf("older than the oldest: %d, want the bound", got)
	}
	if got := extrapolate(2000, rateSample{}, time.Hour); got != 2000 {
		t.Errorf("no totals: %d", got)
	}
}

func TestETAEstimate(t *testing.T) {
	t.Parallel()
	e := testEstimator(t, Config{CountCap: 100})
	now := time.Now()
	s := rateSample{running: 10, meanRun: 4 * time.Second}
	started := now.Add(-time.Second)
	if eta, ok := e.estimate(etaRow{State: "running", StartedAt: &started, Now: now}, s, 0); !ok || eta.Seconds != 3 || eta.Starts {
		t.Errorf("running 1 s of 4: %+v %v", eta, ok)
	}
	if eta, ok := e.estimate(etaRow{State: "queued", Now: now, ScheduledAt: now, Counted: true, Ahead: 19}, s, 0); !ok ||
		eta.Seconds != 8 || !eta.Starts {
		t.Errorf("19 ahead of 10 workers of 4 s: %+v %v", eta, ok)
	}
	if eta, _ := e.estimate(etaRow{State: "queued", Now: now, ScheduledAt: now.Add(90 * time.Second), Counted: true}, s, 0); eta.Seconds != 90 {
		t.Errorf("scheduled in 90 s: %+v", eta)
	}
	// Past the bound without totals: at least the bound ahead.
	if eta, _ := e.estimate(etaRow{State: "queued", Now: now, ScheduledAt: now, Counted: false}, s, 0); eta.Seconds != 41 {
		t.Errorf("past the bound: %+v", eta)
	}
	if _, ok := e.estimate(etaRow{State: "succeeded", Now: now}, s, 0); ok {
		t.Error("an ended job has an ETA")
	}
	if got := (ETA{Seconds: 0}).RetryAfter(); got != 1 {
		t.Errorf("retry after of 0 s: %d", got)
	}
	if got := (ETA{Seconds: 600}).RetryAfter(); got != 60 {
		t.Errorf("retry after of 600 s: %d", got)
	}
}
