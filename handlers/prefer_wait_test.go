package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"asterion/identity"
	"asterion/jobs/provider"
)

// TestPreferWait: a submit that may wait longer than its prompt takes answers 200 with the
// response (or the error) and Preference-Applied; one that may not answers the usual 202
// after the wait; a status GET waits the same way.
func TestPreferWait(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{Provider: provider.NewSim(provider.SimConfig{})})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	type answer struct {
		JobID    string `json:"job_id"`
		State    string `json:"state"`
		Response *struct {
			ResponseID string `json:"response_id"`
			Text       string `json:"text"`
		} `json:"response"`
		Error *struct {
			Kind string `json:"kind"`
		} `json:"error"`
		Operation struct {
			StatusHref string `json:"status_href"`
		} `json:"operation"`
	}
	post := func(prompt, prefer string) (liveResp, answer, time.Duration) {
		t.Helper()
		start := time.Now()
		r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": prompt}, "Prefer", prefer)
		return r, mustDecode[answer](t, r.Body), time.Since(start)
	}

	r, a, took := post("quick one #sim:latency=1s", "respond-async, wait=5")
	if r.StatusCode != http.StatusOK || a.State != "succeeded" || a.Response == nil || a.Response.Text == "" ||
		r.Header.Get("Preference-Applied") != "wait=5" {
		t.Fatalf("wait=5 on a 1 s prompt: %s", r)
	}
	// The 200 with the response says the answer came before the 5 s wait ran out; it cannot
	// come before the prompt's own second.
	if took < time.Second {
		t.Errorf("answered after %v, before the prompt's 1 s latency", took)
	}

	r, a, took = post("slow one #sim:latency=4s", "wait=1")
	if r.StatusCode != http.StatusAccepted || r.Header.Get("Preference-Applied") != "" || a.Response != nil ||
		a.State == "succeeded" {
		t.Fatalf("wait=1 on a 4 s prompt: %s", r)
	}
	// The 202 of a job not yet done says the server did not wait for the prompt's end; it
	// must still have waited the second it was allowed.
	if took < time.Second {
		t.Errorf("202 after %v, before the 1 s wait", took)
	}
	// The status of the slow one, waited for.
	st := f.do(t, "GET", a.Operation.StatusHref, u.Tok, nil, "Prefer", "wait=10")
	if st.StatusCode != http.StatusOK || st.Header.Get("Preference-Applied") != "wait=10" ||
		!strings.Contains(string(st.Body), `"status":"completed"`) {
		t.Errorf("status with wait=10: %s", st)
	}

	r, a, _ = post("fails for good #sim:fail=provider_4xx", "wait=5")
	if r.StatusCode != http.StatusOK || a.State != "failed" || a.Error == nil || a.Error.Kind != "provider_4xx" {
		t.Errorf("a failing prompt with wait=5: %s", r)
	}
	if r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "no wait"}); r.StatusCode != http.StatusAccepted {
		t.Errorf("without Prefer: %s", r)
	}
}

// TestPreferWaitHoldsNoConnection: a hundred submits waiting at once all get their answer,
// while the database never sees more connections than the server's pools hold.
func TestPreferWaitHoldsNoConnection(t *testing.T) {
	t.Parallel()
	// Each waiting request holds one of its caller's stream slots: the limit makes room for all.
	f := startLiveServerWith(t, liveServerConfig{Provider: provider.NewSim(provider.SimConfig{}), Streams: StreamConfig{MaxPerUser: 128}})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	var dbName string
	if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var peak atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var n int64
			if f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE datname = ?", dbName).Scan(&n) == nil {
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := f.request(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "waiting #sim:latency=100ms"}, "Prefer", "wait=20")
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("submit: %v", err)
				return
			}
			defer resp.Body.Close()
			var a struct {
				State string `json:"state"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&a)
			if resp.StatusCode == http.StatusOK && a.State == "succeeded" {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if ok.Load() != 100 {
		t.Errorf("%d of 100 waiting submits answered 200 succeeded", ok.Load())
	}
	// The app's pool, River's pool, the listeners and this test's sampler: far fewer than 100.
	if p := peak.Load(); p > 45 {
		t.Errorf("%d connections at the peak of 100 waiting submits: waiters hold connections", p)
	}
}
