package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// account is a rate-limited OpenAI-compatible account shared by every process that calls it:
// at most rpm calls in any sliding minute, a 429 with Retry-After (the seconds until the oldest
// call leaves the window) beyond that, and the x-ratelimit-* headers on every answer. Answers
// stream, byte for byte as OpenAI sends them. rpm 0 is unlimited.
type account struct {
	srv *httptest.Server
	rpm int

	mu       sync.Mutex
	window   []time.Time
	starts   []time.Time
	limited  []limitedCall
	problems []string
}

type limitedCall struct {
	at         time.Time
	retryAfter time.Duration
}

func newAccount(t *testing.T, rpm int) *account {
	a := &account{rpm: rpm}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *account) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	a.mu.Lock()
	if json.Unmarshal(body, &req) != nil || req.Model != fakeModel || !req.Stream {
		a.problems = append(a.problems, "bad request: "+truncate(string(body), 200))
		a.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	cut := 0
	for cut < len(a.window) && now.Sub(a.window[cut]) >= time.Minute {
		cut++
	}
	a.window = a.window[cut:]
	if a.rpm > 0 && len(a.window) >= a.rpm {
		wait := a.window[0].Add(time.Minute).Sub(now)
		secs := int(math.Ceil(wait.Seconds()))
		a.limited = append(a.limited, limitedCall{at: now, retryAfter: time.Duration(secs) * time.Second})
		a.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.Header().Set("X-Ratelimit-Limit-Requests", strconv.Itoa(a.rpm))
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.Header().Set("X-Ratelimit-Reset-Requests", wait.String())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	a.window = append(a.window, now)
	a.starts = append(a.starts, now)
	remaining, reset := a.rpm-len(a.window), a.window[0].Add(time.Minute).Sub(now)
	a.mu.Unlock()
	if a.rpm > 0 {
		w.Header().Set("X-Ratelimit-Limit-Requests", strconv.Itoa(a.rpm))
		w.Header().Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(remaining))
		w.Header().Set("X-Ratelimit-Reset-Requests", reset.String())
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	chunk := func(s string) {
		_, _ = io.WriteString(w, s)
		fl.Flush()
	}
	const head = `data: {"id":"chatcmpl-acct","object":"chat.completion.chunk","created":1741000000,"model":"` + fakeModel + `","choices":[`
	chunk(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n")
	for _, word := range []string{"paced", " and", " answered"} {
		chunk(head + `{"index":0,"delta":{"content":"` + word + `"},"finish_reason":null}],"usage":null}` + "\n\n")
	}
	chunk(head + `{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	chunk(head + `],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}` + "\n\n")
	chunk("data: [DONE]\n\n")
}

func (a *account) record() (starts []time.Time, limited []limitedCall, problems []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.starts...), append([]limitedCall(nil), a.limited...), append([]string(nil), a.problems...)
}

// twoServers starts two `asterion serve` processes against one database and the account.
func twoServers(t *testing.T, databaseURL string, acct *account, env map[string]string) []*server {
	full := map[string]string{
		"ASTERION_PROVIDER":        "openai",
		"ASTERION_OPENAI_BASE_URL": acct.srv.URL + "/v1",
		"ASTERION_OPENAI_API_KEY":  fakeAPIKey,
		"ASTERION_OPENAI_MODEL":    fakeModel,
	}
	for k, v := range env {
		full[k] = v
	}
	return []*server{startServe(t, "serve-a", databaseURL, full), startServe(t, "serve-b", databaseURL, full)}
}

// submitAll submits n prompts at once, alternating between the servers, and requires 202s.
func submitAll(t *testing.T, srvs []*server, token string, n int) []submitResult {
	var (
		wg  sync.WaitGroup
		acc acceptedSet
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := newAPI(t, srvs[i%len(srvs)].base, token).submit(context.Background(), fmt.Sprintf("governed prompt %d", i), nil)
			if r.Status != http.StatusAccepted {
				t.Errorf("submit %d: status %d %v", i, r.Status, r.Err)
				return
			}
			acc.add(r)
		}(i)
	}
	wg.Wait()
	return acc.all()
}

// mostIn is the most times within any window of w.
func mostIn(ts []time.Time, w time.Duration) int {
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

// TestGovernorLearnsTheAccountsLimit: with no limit configured, two servers sharing an account of
// 60 calls a minute learn its limit from its headers and answer every prompt, with at most ten
// calls refused in all and none made while a 429's Retry-After holds.
func TestGovernorLearnsTheAccountsLimit(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	n := pickInt(t, "ASTERION_RELIABILITY_GOVERNOR_PROMPTS", 40, 200)
	acct := newAccount(t, 60)
	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	srvs := twoServers(t, d.URL.String(), acct, nil)
	accepted := submitAll(t, srvs, m.Token, n)
	dbtest.WaitForDetail(t, time.Duration(n)*2*time.Second+2*time.Minute, "every governed prompt to succeed", func() (bool, string) {
		k := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'succeeded'")
		return k == len(accepted), fmt.Sprintf("%d of %d succeeded", k, len(accepted))
	})
	starts, limited, problems := acct.record()
	if len(problems) > 0 {
		t.Errorf("the account saw bad requests: %v", problems)
	}
	if len(limited) > 10 {
		t.Errorf("%d calls answered 429, want at most 10", len(limited))
	}
	// A call already on its way when a 429 was sent may arrive just after it; one that started
	// later than that waited out the Retry-After.
	const inFlight = 200 * time.Millisecond
	for _, l := range limited {
		for _, s := range starts {
			if s.After(l.at.Add(inFlight)) && s.Before(l.at.Add(l.retryAfter)) {
				t.Errorf("a call started %v after a 429 whose Retry-After was %v", s.Sub(l.at), l.retryAfter)
			}
		}
	}
	checkNoPanic(t, srvs[0].proc, srvs[1].proc)
}

// grantedSlots reads the call slots a process's log says its governor granted, by job: the
// last slot of a job is the one its call started on (an earlier one was given up when its
// claim found the job taken or held back).
func grantedSlots(t *testing.T, p *proc) (all []time.Time, byJob map[string]time.Time) {
	t.Helper()
	byJob = make(map[string]time.Time)
	for _, line := range strings.Split(p.logText(), "\n") {
		var rec struct {
			Msg   string    `json:"msg"`
			JobID string    `json:"job_id"`
			Slot  time.Time `json:"slot"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "provider call slot granted" {
			continue
		}
		all = append(all, rec.Slot)
		byJob[rec.JobID] = rec.Slot
	}
	return all, byJob
}

// TestConfiguredRPMBoundsEveryWindow: with ASTERION_PROVIDER_RPM=120, two servers together are
// granted at most 22 call slots in any 10 s window, and no job's call starts before its slot.
// The window is checked on the slots, which the governor computes on the database's clock, as
// each server's log reports them; a loaded machine may start a call late, and late calls bunch
// up without the governor having granted them together.
func TestConfiguredRPMBoundsEveryWindow(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	n := pickInt(t, "ASTERION_RELIABILITY_RPM_PROMPTS", 60, 300)
	acct := newAccount(t, 0)
	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	srvs := twoServers(t, d.URL.String(), acct, map[string]string{"ASTERION_PROVIDER_RPM": "120", "ASTERION_LOG_LEVEL": "debug"})
	accepted := submitAll(t, srvs, m.Token, n)
	dbtest.WaitForDetail(t, time.Duration(n)*time.Second+time.Minute, "every paced prompt to succeed", func() (bool, string) {
		k := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'succeeded'")
		return k == len(accepted), fmt.Sprintf("%d of %d succeeded", k, len(accepted))
	})
	var started []struct {
		ID        string    `bun:"id"`
		StartedAt time.Time `bun:"started_at"`
	}
	if err := d.Bun.NewSelect().TableExpr("sa_job").Column("id", "started_at").Scan(context.Background(), &started); err != nil {
		t.Fatal(err)
	}
	var slots []time.Time
	slotOf := make(map[string]time.Time)
	for _, s := range srvs {
		all, byJob := grantedSlots(t, s.proc)
		slots = append(slots, all...)
		for id, at := range byJob {
			slotOf[id] = at
		}
	}
	if len(started) != n || len(slotOf) != n {
		t.Fatalf("%d jobs, %d of them with a granted slot in the servers' logs, want %d of each", len(started), len(slotOf), n)
	}
	if got := mostIn(slots, 10*time.Second); got > 22 {
		t.Errorf("%d call slots granted in a 10 s window, want at most ceil(120 × 10 / 60) + 2 = 22", got)
	}
	for _, j := range started {
		if slot := slotOf[j.ID]; j.StartedAt.Before(slot) {
			t.Errorf("job %s started %v before its slot", j.ID, slot.Sub(j.StartedAt))
		}
	}
	// n slots two a second, two of them at once, span at least (n - 2) / 2 seconds.
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	if span := slots[len(slots)-1].Sub(slots[0]); span < time.Duration(n-2)*500*time.Millisecond-time.Millisecond {
		t.Errorf("%d slots granted within %v: not paced at 2 a second", len(slots), span)
	}
	checkNoPanic(t, srvs[0].proc, srvs[1].proc)
}
