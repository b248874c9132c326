package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/delivery"
	"asterion/jobs/jobstest"
)

// hookRequest is one request a test hookReceiver got.
type hookRequest struct {
	id, attempt, timestamp string
	sigOK                  bool
	header                 http.Header
	body                   []byte
	doc                    map[string]any
}

// hookReceiver is a real webhook endpoint that checks every signature itself, with the test's
// own Standard Webhooks verifier.
type hookReceiver struct {
	t      testing.TB
	srv    *httptest.Server
	secret string
	// answer decides the status of the n-th request (1-based); it may block.
	answer func(n int, r hookRequest) int

	mu   sync.Mutex
	reqs []hookRequest
	got  chan hookRequest
}

// newHookReceiver starts a receiver with a fresh webhook secret (rc.secret).
func newHookReceiver(t testing.TB, answer func(n int, r hookRequest) int) *hookReceiver {
	secret, err := delivery.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	v, err := newWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &hookReceiver{t: t, secret: secret, answer: answer, got: make(chan hookRequest, 64)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := hookRequest{id: r.Header.Get("webhook-id"), attempt: r.Header.Get("X-Asterion-Attempt"),
			timestamp: r.Header.Get("webhook-timestamp"), header: r.Header.Clone(), body: body,
			sigOK: v.verify(r.Header, body) == nil && r.Method == http.MethodPost &&
				r.Header.Get("Content-Type") == "application/json"}
		_ = json.Unmarshal(body, &got.doc)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, got)
		n := len(rc.reqs)
		rc.mu.Unlock()
		rc.got <- got
		status := http.StatusOK
		if rc.answer != nil {
			status = rc.answer(n, got)
		}
		if !got.sigOK {
			status = http.StatusUnauthorized
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// requests returns a copy of what arrived so far.
func (rc *hookReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookRequest(nil), rc.reqs...)
}

// byID counts the requests per delivery id.
func (rc *hookReceiver) byID() map[string]int {
	out := map[string]int{}
	for _, r := range rc.requests() {
		out[r.id]++
	}
	return out
}

// setWebhook configures the org's webhook, its secret sealed with the tests' key as
// `asterion org set-webhook` stores it.
func (e *tenv) setWebhook(url, secret string) {
	e.T.Helper()
	sealed, err := delivery.SealSecret(testKey, e.O, secret)
	if err != nil {
		e.T.Fatalf("seal the webhook secret: %v", err)
	}
	if _, err := e.D.Bun.ExecContext(context.Background(), "UPDATE orgs SET webhook_url = ?, webhook_secret = ? WHERE id = ?",
		url, sealed, e.O); err != nil {
		e.T.Fatalf("set webhook: %v", err)
	}
}

// deliveryOfJob reads the delivery ledger row of a prompt job.
func (e *tenv) deliveryOfJob(jobID uuid.UUID) (delivery.Delivery, bool) {
	e.T.Helper()
	var d []delivery.Delivery
	if err := e.D.Bun.NewSelect().Model(&d).Where("job_id = ?", jobID).Scan(context.Background()); err != nil {
		e.T.Fatalf("read delivery of job %s: %v", jobID, err)
	}
	if len(d) == 0 {
		return delivery.Delivery{}, false
	}
	if len(d) > 1 {
		e.T.Fatalf("%d deliveries for job %s, want at most one", len(d), jobID)
	}
	return d[0], true
}

// waitDelivery waits until the job's delivery is in one of states.
func (e *tenv) waitDelivery(jobID uuid.UUID, timeout time.Duration, states ...string) delivery.Delivery {
	e.T.Helper()
	var d delivery.Delivery
	jobstest.WaitFor(e.T, timeout, "delivery of job "+jobID.String()+" to be "+strings.Join(states, "|"), func() bool {
		var ok bool
		d, ok = e.deliveryOfJob(jobID)
		if !ok {
			return false
		}
		for _, s := range states {
			if d.State == s {
				return true
			}
		}
		return false
	})
	return d
}

// statusJSON marshals the operation's status document and validates it against the schema.
func (e *tenv) statusJSON(v jobs.Viewer, id uuid.UUID) map[string]any {
	e.T.Helper()
	doc, err := e.S.OperationStatus(context.Background(), v, id)
	if err != nil {
		e.T.Fatalf("status of %s: %v", id, err)
	}
	return jobstest.ValidStatusDoc(e.T, doc)
}

func (e *tenv) deliveryAttempts(deliveryID uuid.UUID) []delivery.Attempt {
	e.T.Helper()
	var rows []delivery.Attempt
	if err := e.D.Bun.NewSelect().Model(&rows).Where("delivery_id = ?", deliveryID).OrderExpr("attempt").
		Scan(context.Background()); err != nil {
		e.T.Fatalf("read attempts: %v", err)
	}
	return rows
}

func fastDelivery(base time.Duration) delivery.Config {
	return delivery.Config{Timeout: 3 * time.Second, BackoffBase: base, MaxAttempts: 4,
		RecoverEvery: 500 * time.Millisecond, AllowPrivate: true}
}

func TestDeliverySignedRetriedAndDeliveredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), fastDelivery(200*time.Millisecond))
	rc := newHookReceiver(t, func(n int, _ hookRequest) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	e.setWebhook(rc.srv.URL+"/hook", rc.secret)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	start := time.Now()
	sub := e.Submit("deliver me")
	job := e.WaitState(sub.JobID, jobs.StateSucceeded, 10*time.Second)
	d := e.waitDelivery(sub.JobID, 15*time.Second, delivery.Delivered)
	t.Logf("submitted → delivered after a 500 and a retry: %s", time.Since(start))

	// The ledger: two attempts, a retry on the 500 and the delivery.
	if d.Attempts != 2 || d.LastStatusCode == nil || *d.LastStatusCode != 200 || d.InFlightToken != nil {
		t.Fatalf("delivery %+v: want 2 attempts ending 200 with no in-flight marker", d)
	}
	at := e.deliveryAttempts(d.ID)
	if len(at) != 2 || strv(at[0].Outcome) != "retry" || at[0].StatusCode == nil || *at[0].StatusCode != 500 ||
		strv(at[1].Outcome) != "delivered" || *at[1].StatusCode != 200 || at[1].FinishedAt == nil {
		t.Fatalf("attempts %+v: want [retry 500, delivered 200]", at)
	}
	if gap := at[1].StartedAt.Sub(*at[0].FinishedAt); gap < 150*time.Millisecond {
		t.Errorf("second attempt %s after the first: want the backoff (200 ms)", gap)
	}

	// The hookReceiver: both requests signed, the same delivery id, the same body.
	reqs := rc.requests()
	if len(reqs) != 2 {
		t.Fatalf("hookReceiver got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if !r.sigOK {
			t.Errorf("request %d: bad signature", i+1)
		}
		if r.id != d.ID.String() {
			t.Errorf("request %d: webhook-id %q, want %s", i+1, r.id, d.ID)
		}
	}
	if string(reqs[0].body) != string(reqs[1].body) || reqs[0].attempt != "1" || reqs[1].attempt != "2" {
		t.Errorf("the retry sent another body or attempt header: %s / %s", reqs[0].body, reqs[1].body)
	}
	for _, old := range []string{"X-Asterion-Signature", "X-Asterion-Delivery"} {
		if reqs[0].header.Get(old) != "" {
			t.Errorf("the delivery still carries %s", old)
		}
	}
	// Each attempt is signed with its own timestamp, which is the attempt's time.
	for i, r := range reqs {
		ts, err := strconv.ParseInt(r.timestamp, 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("request %d: webhook-timestamp %q is not the time of the attempt", i+1, r.timestamp)
		}
	}
	// A captured delivery replayed later is refused by the receiver: the signature covers the
	// timestamp, so the replay can neither keep the old one (too old) nor change it (no match).
	v, err := newWebhookVerifier(rc.secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.verify(reqs[1].header, reqs[1].body); err != nil {
		t.Fatalf("the captured delivery does not verify now: %v", err)
	}
	v.now = func() time.Time { return time.Now().Add(webhookTolerance + time.Minute) }
	if err := v.verify(reqs[1].header, reqs[1].body); !errors.Is(err, errStaleTimestamp) {
		t.Errorf("a replay 6 minutes later: %v, want the stale-timestamp refusal", err)
	}
	fresh := reqs[1].header.Clone()
	fresh.Set("webhook-timestamp", strconv.FormatInt(time.Now().Add(webhookTolerance+time.Minute).Unix(), 10))
	if err := v.verify(fresh, reqs[1].body); !errors.Is(err, errNoMatch) {
		t.Errorf("a replay with a new timestamp: %v, want no signature match", err)
	}
	tampered := append([]byte(nil), reqs[1].body...)
	tampered[len(tampered)-2] ^= 1
	v.now = time.Now
	if err := v.verify(reqs[1].header, tampered); !errors.Is(err, errNoMatch) {
		t.Errorf("an altered body: %v, want no signature match", err)
	}
	var resp db.Entity
	if err := e.D.Bun.NewSelect().Model(&resp).Where("id = ?", *job.ResponseID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	doc := reqs[1].doc
	want := map[string]any{"schema": "asterion.delivery.v1", "delivery_id": d.ID.String(), "operation_id": d.OperationID.String(),
		"prompt_id": sub.PromptID.String(), "job_id": sub.JobID.String(), "response_id": job.ResponseID.String(),
		"text": resp.Body, "created_at": deferred.FormatTime(resp.CreatedAt)}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("body %s = %v, want %v", k, doc[k], v)
		}
	}
	if len(doc) != len(want) {
		t.Errorf("body has %d fields, want %d: %s", len(doc), len(want), reqs[1].body)
	}

	// The registry: a deterministic id, completed once with its result, history verified.
	if wantID := deferred.OperationID(delivery.Kind, delivery.OwnerName, map[string]string{
		"prompt_id": sub.PromptID.String(), "job_id": sub.JobID.String(), "response_id": job.ResponseID.String()}, ""); d.OperationID != wantID {
		t.Errorf("delivery operation id %s, want the deterministic %s", d.OperationID, wantID)
	}
	st := e.statusJSON(e.V, d.OperationID)
	if st["status"] != "completed" || st["kind"] != delivery.Kind {
		t.Fatalf("status %v", st)
	}
	res, _ := st["result"].(map[string]any)
	if res["delivery_id"] != d.ID.String() || res["status_code"] != float64(200) || res["attempts"] != float64(2) {
		t.Errorf("result %v", res)
	}
	if got := strings.Join(e.HistoryStatuses(d.OperationID), ","); got != "pending,running,completed" {
		t.Errorf("history %s, want pending,running,completed", got)
	}
	det, err := jobstest.NewReads(t, e.S).GetOperation(context.Background(), e.V, d.OperationID)
	if err != nil || det.ChainBrokenAt != -1 {
		t.Fatalf("GetOperation: %v, broken at %d", err, det.ChainBrokenAt)
	}
	// Nothing more arrives.
	e.settled()
	if n := len(rc.requests()); n != 2 {
		t.Errorf("hookReceiver got %d requests after delivery, want still 2", n)
	}
	// A second org without a webhook gets no delivery.
	if n := e.Count("SELECT count(*) FROM sa_operation WHERE kind = ?", delivery.Kind); n != 1 {
		t.Errorf("%d delivery operations, want 1", n)
	}
}

func TestDeliveryFailsOn4xxAndWithoutWebhookNothingIsSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), fastDelivery(100*time.Millisecond))
	rc := newHookReceiver(t, func(int, hookRequest) int { return http.StatusNotFound })
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)

	plain := e.Submit("no webhook yet")
	e.WaitState(plain.JobID, jobs.StateSucceeded, 10*time.Second)
	if _, ok := e.deliveryOfJob(plain.JobID); ok {
		t.Fatal("a delivery was accepted for an org without a webhook")
	}

	e.setWebhook(rc.srv.URL, rc.secret)
	sub := e.Submit("to a missing endpoint")
	d := e.waitDelivery(sub.JobID, 15*time.Second, delivery.Failed)
	if d.Attempts != 1 || strv(d.ErrorKind) != "receiver_4xx" || len(rc.requests()) != 1 {
		t.Fatalf("delivery %+v after %d requests: want one attempt failing receiver_4xx", d, len(rc.requests()))
	}
	st := e.statusJSON(e.V, d.OperationID)
	errObj, _ := st["error"].(map[string]any)
	if st["status"] != "failed" || errObj["kind"] != "receiver_4xx" || !strings.Contains(errObj["message"].(string), "404") {
		t.Errorf("status %v", st)
	}
}

// TestDeliveryRecoversAfterRestart accepts three deliveries while no worker pool runs (a
// server stopped between accept and send), then loses the River job of one and leaves
// another marked in flight by an execution that died. A new Service and Runtime on the same
// database deliver each exactly once.
func TestDeliveryRecoversAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), fastDelivery(100*time.Millisecond))
	rc := newHookReceiver(t, nil)
	e.setWebhook(rc.srv.URL, rc.secret)
	ctx := context.Background()

	var ds [3]delivery.Delivery
	for i := range ds {
		res, err := e.S.RunSync(ctx, e.V, "sync prompt")
		if err != nil || res.Job.State != string(jobs.StateSucceeded) {
			t.Fatalf("RunSync: %v, job %+v", err, res.Job)
		}
		d, ok := e.deliveryOfJob(res.Job.ID)
		if !ok || d.State != delivery.Accepted || d.RiverJobID == nil {
			t.Fatalf("delivery after accept: %+v (found %v)", d, ok)
		}
		if st := e.statusJSON(e.V, d.OperationID); st["status"] != "pending" || st["cancel_href"] == nil {
			t.Fatalf("accepted delivery status %v: want pending and cancelable", st)
		}
		ds[i] = d
	}
	// ds[0]: its River job is still there. ds[1]: its River job is gone.
	if _, err := e.D.Bun.ExecContext(ctx, "DELETE FROM river_job WHERE id = ?", *ds[1].RiverJobID); err != nil {
		t.Fatal(err)
	}
	// ds[2]: an execution marked it in flight and died: the ledger says in_flight since long
	// ago, its River job is still running (nobody rescued it yet).
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE sa_delivery SET state = 'in_flight', attempts = 1,
		in_flight_since = now() - interval '1 hour', in_flight_token = 'dead' WHERE id = ?`, ds[2].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.D.Bun.ExecContext(ctx, `INSERT INTO sa_delivery_attempt (delivery_id, attempt, started_at)
		VALUES (?, 1, now() - interval '1 hour')`, ds[2].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = '{dead-worker}' WHERE id = ?`, *ds[2].RiverJobID); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("%d requests before any worker ran", n)
	}

	// A new process: new Service and Runtime on the same database.
	start := time.Now()
	s2 := e.service(jobstest.InstantSim(), fastDelivery(100*time.Millisecond))
	jobstest.StartRuntime(t, e.D.Pool, s2, 2)
	for _, d := range ds {
		e.waitDelivery(d.JobID, 20*time.Second, delivery.Delivered)
	}
	t.Logf("all three delivered %s after the restart", time.Since(start))
	e.settled() // recovery runs every 500 ms: give it the chance to duplicate
	counts := rc.byID()
	for i, d := range ds {
		if counts[d.ID.String()] != 1 {
			t.Errorf("delivery %d (%s) arrived %d times, want exactly once", i, d.ID, counts[d.ID.String()])
		}
	}
	if len(rc.requests()) != 3 {
		t.Errorf("hookReceiver got %d requests, want 3", len(rc.requests()))
	}
	for _, r := range rc.requests() {
		if !r.sigOK {
			t.Errorf("request %s: bad signature", r.id)
		}
	}
	// The in-flight one records its interrupted attempt and the delivery as attempt 2.
	at := e.deliveryAttempts(ds[2].ID)
	if len(at) != 2 || strv(at[0].Outcome) != "interrupted" || strv(at[1].Outcome) != "delivered" {
		t.Errorf("attempts of the interrupted delivery: %+v", at)
	}
	for i, d := range ds {
		st := e.statusJSON(e.V, d.OperationID)
		if st["status"] != "completed" {
			t.Errorf("delivery %d status %v", i, st)
		}
		hist := e.HistoryStatuses(d.OperationID)
		if hist[len(hist)-1] != "completed" || strings.Count(strings.Join(hist, ","), "completed") != 1 {
			t.Errorf("delivery %d history %v: want one completed at the end", i, hist)
		}
	}
}

func TestDeliveryCancelRefusedWhileInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), fastDelivery(100*time.Millisecond))
	release := make(chan struct{})
	rc := newHookReceiver(t, func(int, hookRequest) int { <-release; return http.StatusNoContent })
	e.setWebhook(rc.srv.URL, rc.secret)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("slow hookReceiver")
	select {
	case <-rc.got:
	case <-time.After(15 * time.Second):
		t.Fatal("the hookReceiver never got the delivery")
	}
	d, _ := e.deliveryOfJob(sub.JobID)
	if d.State != delivery.InFlight {
		t.Fatalf("delivery %s while the hookReceiver blocks, want in_flight", d.State)
	}
	st := e.statusJSON(e.V, d.OperationID)
	if st["status"] != "running" || st["cancel/unavailable-reason"] != delivery.InFlightReason || st["cancel_href"] != nil {
		t.Fatalf("status while in flight %v: want running with the in-flight reason and no cancel_href", st)
	}
	_, err := e.S.CancelOperation(context.Background(), e.V, d.OperationID, jobs.Actor{Name: "test"})
	var nc *jobs.ErrNotCancelable
	if !errors.As(err, &nc) || nc.Reason != delivery.InFlightReason {
		t.Fatalf("cancel while in flight: %v, want ErrNotCancelable(%q)", err, delivery.InFlightReason)
	}
	close(release)
	d = e.waitDelivery(sub.JobID, 10*time.Second, delivery.Delivered)
	if st := e.statusJSON(e.V, d.OperationID); st["status"] != "completed" {
		t.Fatalf("status after release %v", st)
	}
	if op := e.Operation(d.OperationID); op.Status != "completed" {
		t.Fatalf("operation %s after release", op.Status)
	}
	if len(rc.requests()) != 1 {
		t.Errorf("hookReceiver got %d requests, want 1", len(rc.requests()))
	}
}

func TestDeliveryCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	// A one-minute backoff keeps a retryable delivery waiting for as long as the test runs.
	e := newEnv(t, jobstest.InstantSim(), fastDelivery(time.Minute))
	rc := newHookReceiver(t, func(int, hookRequest) int { return http.StatusServiceUnavailable })
	e.setWebhook(rc.srv.URL, rc.secret)
	ctx := context.Background()

	// Accepted, no worker pool yet: cancel it.
	res, err := e.S.RunSync(ctx, e.V, "accepted then cancelled")
	if err != nil {
		t.Fatal(err)
	}
	accepted, _ := e.deliveryOfJob(res.Job.ID)
	doc, err := e.S.CancelOperation(ctx, e.V, accepted.OperationID, jobs.Actor{Name: "test"})
	if err != nil {
		t.Fatalf("cancel an accepted delivery: %v", err)
	}
	if st := jobstest.ValidStatusDoc(t, doc); st["status"] != "cancelled" {
		t.Fatalf("status after cancel %v", st)
	}
	if d, _ := e.deliveryOfJob(res.Job.ID); d.State != delivery.Cancelled {
		t.Fatalf("ledger %s after cancel", d.State)
	}
	if st := e.RiverState(*accepted.RiverJobID); st != "cancelled" {
		t.Errorf("river job %s after cancel, want cancelled", st)
	}

	// Retryable after a 503: cancel it while it waits for its backoff.
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("retryable then cancelled")
	d := e.waitDelivery(sub.JobID, 15*time.Second, delivery.Retryable)
	st := e.statusJSON(e.V, d.OperationID)
	if st["status"] != "running" || st["cancel_href"] != deferred.CancelHref(d.OperationID) {
		t.Fatalf("status while waiting %v: want running with cancel_href", st)
	}
	doc, err = e.S.CancelOperation(ctx, e.V, d.OperationID, jobs.Actor{Name: "test"})
	if err != nil {
		t.Fatalf("cancel a waiting delivery: %v", err)
	}
	if st := jobstest.ValidStatusDoc(t, doc); st["status"] != "cancelled" {
		t.Fatalf("status after cancel %v", st)
	}
	e.settled()
	counts := rc.byID()
	if counts[accepted.ID.String()] != 0 || counts[d.ID.String()] != 1 {
		t.Errorf("requests per delivery %v: want none for the accepted one, one for the retryable one", counts)
	}
	if got := e.HistoryStatuses(d.OperationID); strings.Join(got, ",") != "pending,running,cancelled" {
		t.Errorf("history %v", got)
	}
	// A terminal delivery is not cancelled again.
	if _, err := e.S.CancelOperation(ctx, e.V, d.OperationID, jobs.Actor{Name: "test"}); !errors.Is(err, jobs.ErrConflict) {
		t.Errorf("second cancel: %v, want ErrConflict", err)
	}
}

func strv(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
