package jobs_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/governor"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// timedCalls records when each provider call started.
type timedCalls struct {
	mu     sync.Mutex
	starts []time.Time
}

func (tc *timedCalls) add() time.Time { return tc.addAt(time.Now()) }

// addAt records a start at at.
func (tc *timedCalls) addAt(at time.Time) time.Time {
	tc.mu.Lock()
	tc.starts = append(tc.starts, at)
	tc.mu.Unlock()
	return at
}

func (tc *timedCalls) all() []time.Time {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	out := append([]time.Time(nil), tc.starts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// mostInWindow is the most starts within any window of w.
func mostInWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// withGovernor gives a service a provider governor.
func withGovernor(t *testing.T, rpm int) func(*jobs.Config) {
	return withRecordedGovernor(t, rpm, nil)
}

// withRecordedGovernor gives a service a provider governor whose granted slots are added to
// slots (when not nil).
func withRecordedGovernor(t *testing.T, rpm int, slots *timedCalls) func(*jobs.Config) {
	return func(cfg *jobs.Config) {
		gc := governor.Config{DB: cfg.DB, RPM: rpm}
		if slots != nil {
			gc.OnGrant = func(_ string, gr governor.Grant) { slots.addAt(gr.At) }
		}
		g, err := governor.New(gc)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Governor = g
	}
}

// twoProcesses gives e a second service over the same database, both governed, each with a
// running pool of four workers.
func twoProcesses(t *testing.T, e *tenv, prov provider.Provider, mods ...func(*jobs.Config)) {
	other := e.service(prov, mods...)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	jobstest.StartRuntime(t, e.D.Pool, other, 4)
}

// TestGovernorPacesCallsAcrossProcesses: with a configured limit, two processes together are
// granted no more call slots in a window than the limit allows, no call starts before its slot,
// no job spends an attempt on waiting, and a waiting job says what it waits for. The window is
// checked on the slots, which the governor computes on the database's clock, not on when the
// calls happened to run: a loaded machine may start a call late, and late calls bunch up
// without the governor having granted them together.
func TestGovernorPacesCallsAcrossProcesses(t *testing.T) {
	t.Parallel()
	var calls, slots timedCalls
	fake := newFake(func(_ context.Context, c call) (provider.Response, error) {
		calls.add()
		return okResponse(c), nil
	})
	const rpm, n = 600, 60
	e := newEnv(t, fake, withRecordedGovernor(t, rpm, &slots))
	// Every job is queued before a worker runs: eight workers then always hold more jobs than
	// the slots a tenth of a second apart let start, so some job waits for capacity however
	// slowly the machine submits (submitting beside the workers, a slow machine could keep
	// up with the pace and no job would ever wait).
	ids := make([]jobs.Submitted, n)
	for i := range ids {
		ids[i] = e.Submit("paced")
	}
	twoProcesses(t, e, fake, withRecordedGovernor(t, rpm, &slots))
	jobstest.WaitFor(t, 20*time.Second, "a queued job waiting for provider capacity", func() bool {
		var k int
		_ = e.D.Bun.NewSelect().TableExpr("sa_job").ColumnExpr("count(*)").
			Where("state = 'queued' AND waiting_for = ?", jobs.WaitingProviderCapacity).Scan(context.Background(), &k)
		return k > 0
	})
	for _, s := range ids {
		jobstest.WaitFor(t, 30*time.Second, "every job to succeed", func() bool { return e.Job(s.JobID).State == "succeeded" })
		if j := e.Job(s.JobID); j.Attempt != 1 || j.WaitingFor != nil {
			t.Errorf("job %s: attempt %d, waiting_for %v", s.JobID, j.Attempt, j.WaitingFor)
		}
	}
	starts, granted := calls.all(), slots.all()
	if len(starts) != n || len(granted) < n {
		t.Fatalf("%d calls on %d granted slots, want %d calls, each on a slot", len(starts), len(granted), n)
	}
	if got, limit := mostInWindow(granted, 5*time.Second), rpm*5/60+2; got > limit {
		t.Errorf("%d slots granted in a 5 s window, the limit allows %d", got, limit)
	}
	// Each call waits for its own slot, so the k-th call to start cannot precede the k-th slot.
	for k := range starts {
		if starts[k].Before(granted[k]) {
			t.Errorf("call %d started %v before the %d-th slot", k+1, granted[k].Sub(starts[k]), k+1)
		}
	}
	// 60 slots at 10 a second, two of them at once, span at least 5.8 s.
	if span := granted[n-1].Sub(granted[0]); span < 5800*time.Millisecond-time.Millisecond {
		t.Errorf("%d slots granted within %v: not paced", n, span)
	}
}

// TestRateLimitPausesEveryProcess: after a 429 with a Retry-After, neither process calls the
// model again before it has passed; the limited job retries and succeeds.
func TestRateLimitPausesEveryProcess(t *testing.T) {
	t.Parallel()
	var calls timedCalls
	limitedAt := make(chan time.Time, 1)
	fake := newFake(func(_ context.Context, c call) (provider.Response, error) {
		at := calls.add()
		if c.n == 1 {
			limitedAt <- at
			return provider.Response{}, &provider.Error{Kind: provider.KindRateLimit, StatusCode: 429,
				RetryAfter: 2 * time.Second, HasRetryAfter: true, Message: "slow down"}
		}
		return okResponse(c), nil
	})
	e := newEnv(t, fake, withGovernor(t, 0))
	twoProcesses(t, e, fake, withGovernor(t, 0))
	first := e.Submit("limited first")
	at := <-limitedAt
	// Once the job row shows the 429, every process knows of it.
	jobstest.WaitFor(t, 10*time.Second, "the 429 on the job", func() bool {
		j := e.Job(first.JobID)
		return j.ErrorKind != nil && *j.ErrorKind == string(provider.KindRateLimit)
	})
	more := make([]jobs.Submitted, 5)
	for i := range more {
		more[i] = e.Submit("after the 429")
	}
	for _, s := range append(more, first) {
		jobstest.WaitFor(t, 30*time.Second, "every job to succeed", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	for _, s := range calls.all()[1:] {
		if s.Before(at.Add(2*time.Second - 50*time.Millisecond)) {
			t.Errorf("a call started %v after the 429, inside its 2 s Retry-After", s.Sub(at))
		}
	}
}

// TestGovernorLearnsTheProvidersLimit: with no configured limit, the limit the provider reports
// paces every call after the first answer.
func TestGovernorLearnsTheProvidersLimit(t *testing.T) {
	t.Parallel()
	var calls timedCalls
	fake := newFake(func(_ context.Context, c call) (provider.Response, error) {
		calls.add()
		r := okResponse(c)
		r.Limits = provider.Limits{LimitRequests: 600, HasLimitRequests: true}
		return r, nil
	})
	e := newEnv(t, fake, withGovernor(t, 0))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	first := e.Submit("teaches the limit")
	jobstest.WaitFor(t, 20*time.Second, "the first job", func() bool { return e.Job(first.JobID).State == "succeeded" })
	rest := make([]jobs.Submitted, 30)
	for i := range rest {
		rest[i] = e.Submit("paced by what was learned")
	}
	for _, s := range rest {
		jobstest.WaitFor(t, 30*time.Second, "every job to succeed", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	starts := calls.all()[1:]
	if span := starts[len(starts)-1].Sub(starts[0]); span < 2500*time.Millisecond {
		t.Errorf("30 calls at a learned 600 a minute started within %v", span)
	}
}
