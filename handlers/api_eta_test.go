package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"asterion/identity"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
)

// etaDoc is what the tests read of a handle or a status document.
type etaDoc struct {
	Status     string `json:"status"`
	Terminal   bool   `json:"terminal"`
	ETA        *int   `json:"eta_seconds"`
	RetryAfter *int   `json:"retry_after_seconds"`
	StatusHref string `json:"status_href"`
}

// TestETAOnHandlesAndStatus: every 202 handle and every non-terminal status carries
// eta_seconds, later in line for a job further back, with retry_after_seconds and Retry-After
// following it; a terminal status carries none; every document still passes its schema and the
// status history still verifies.
func TestETAOnHandlesAndStatus(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	var subs []liveSubmitted
	var etas []int
	for i := range 4 {
		r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "in line " + strconv.Itoa(i)})
		if r.StatusCode != http.StatusAccepted {
			t.Fatalf("submit %d: %s", i, r)
		}
		sub := mustDecode[liveSubmitted](t, r.Body)
		if err := deferred.ValidateHandle(sub.Operation); err != nil {
			t.Fatalf("handle %d does not validate: %v\n%s", i, err, sub.Operation)
		}
		h := mustDecode[etaDoc](t, sub.Operation)
		if h.ETA == nil || h.RetryAfter == nil {
			t.Fatalf("handle %d has no eta_seconds: %s", i, sub.Operation)
		}
		if want := min(max(*h.ETA, 1), 60); *h.RetryAfter != want || r.Header.Get("Retry-After") != strconv.Itoa(want) {
			t.Errorf("handle %d: eta %d, retry_after_seconds %d, Retry-After %q, want %d", i, *h.ETA, *h.RetryAfter,
				r.Header.Get("Retry-After"), want)
		}
		subs, etas = append(subs, sub), append(etas, *h.ETA)
	}
	for i := 1; i < len(etas); i++ {
		if etas[i] < etas[i-1] {
			t.Errorf("etas %v: a job further back in line starts sooner", etas)
		}
	}
	if etas[len(etas)-1] <= etas[0] {
		t.Errorf("etas %v: the fourth in line of no running worker starts as soon as the first", etas)
	}

	// A scheduled prompt starts when it is due: its estimate is the wait, its hint the most.
	at := time.Now().Add(10 * time.Minute).UTC()
	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "later", "scheduled_for": at.Format(time.RFC3339Nano)})
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("scheduled submit: %s", r)
	}
	later := mustDecode[etaDoc](t, mustDecode[liveSubmitted](t, r.Body).Operation)
	if later.ETA == nil || *later.ETA < 590 || *later.ETA > 601 || *later.RetryAfter != 60 {
		t.Errorf("scheduled 10 min ahead: eta %v, retry_after %v", later.ETA, later.RetryAfter)
	}

	statusOf := func(sub liveSubmitted) (etaDoc, liveResp) {
		t.Helper()
		h := mustDecode[etaDoc](t, sub.Operation)
		r := f.do(t, "GET", h.StatusHref, u.Tok, nil)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("status: %s", r)
		}
		if err := deferred.ValidateStatus(r.Body); err != nil {
			t.Fatalf("status does not validate: %v\n%s", err, r.Body)
		}
		return mustDecode[etaDoc](t, r.Body), r
	}
	last := subs[len(subs)-1]
	st, sr := statusOf(last)
	if st.Terminal || st.ETA == nil || st.RetryAfter == nil || *st.RetryAfter != min(max(*st.ETA, 1), 60) ||
		sr.Header.Get("Retry-After") != strconv.Itoa(*st.RetryAfter) {
		t.Errorf("queued status: %s (Retry-After %q)", sr.Body, sr.Header.Get("Retry-After"))
	}

	f.StartWorkers(t)
	for _, sub := range subs {
		f.waitJob(t, u, sub.JobID, "succeeded")
	}
	// The registry settles the operation with the job; wait for its status to say so.
	jobstest.WaitFor(t, 20*time.Second, "the operation to complete after its job succeeded", func() bool {
		if st.Status == "completed" {
			return true
		}
		st, sr = statusOf(last)
		return st.Status == "completed"
	})
	if st.ETA != nil || st.RetryAfter != nil || sr.Header.Get("Retry-After") != "" {
		t.Errorf("terminal status carries an estimate: %s (Retry-After %q)", sr.Body, sr.Header.Get("Retry-After"))
	}
	var op struct {
		ID string `json:"operation_id"`
	}
	_ = json.Unmarshal(last.Operation, &op)
	detail := f.do(t, "GET", "/sa-core/v1/deferred-operations/"+op.ID, u.Tok, nil)
	if d := mustDecode[struct {
		Verified bool `json:"history_verified"`
	}](t, detail.Body); !d.Verified {
		t.Errorf("the status history no longer verifies: %s", detail.Body)
	}
}

// TestETAOnChains: a running chain's handle and status carry the estimate of its end: its
// current step's job, then the mean run time of each step after it, so a longer chain ends
// later.
func TestETAOnChains(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true})
	u := f.user(t, "acme", "carla", identity.RoleMember)
	short := f.postChain(t, u, map[string]any{"steps": chainSteps("one")})
	long := f.postChain(t, u, map[string]any{"steps": chainSteps("one", "two", "three")})
	etaOf := func(a chainAccepted) int {
		t.Helper()
		eta, ok := a.handle["eta_seconds"].(float64)
		if !ok {
			t.Fatalf("chain handle has no eta_seconds: %s", a.Operation)
		}
		return int(eta)
	}
	// No worker, nothing measured: one slot of 2 s; each step after the first adds 2 s.
	if s, l := etaOf(short), etaOf(long); l < s+4 {
		t.Errorf("a chain of three ends in about %d s, one of one in %d s: want two more steps of run time", l, s)
	}
	h := mustDecode[etaDoc](t, long.Operation)
	r := f.do(t, "GET", h.StatusHref, u.Tok, nil)
	if err := deferred.ValidateStatus(r.Body); err != nil {
		t.Fatalf("chain status does not validate: %v\n%s", err, r.Body)
	}
	if st := mustDecode[etaDoc](t, r.Body); st.Terminal || st.ETA == nil || *st.RetryAfter != min(max(*st.ETA, 1), 60) {
		t.Errorf("running chain status: %s", r.Body)
	}
}
