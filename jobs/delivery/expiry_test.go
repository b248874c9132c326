package delivery_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/delivery"
	"asterion/jobs/jobstest"
)

// TestExpiryOfADeliveryInFlight: the poller expires a delivery whose request is in flight (it
// cannot be cancelled, expiry wins); the 503 that comes back afterwards retries nothing, and
// recovery leaves the settled row alone.
func TestExpiryOfADeliveryInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), delivery.Config{Timeout: 10 * time.Second, BackoffBase: 100 * time.Millisecond, RecoverEvery: 300 * time.Millisecond, AllowPrivate: true},
		func(c *jobs.Config) { c.Policy = deferred.Policy{MaxTTL: 2 * time.Second} })
	release := make(chan struct{})
	rc := newHookReceiver(t, func(int, hookRequest) int { <-release; return http.StatusServiceUnavailable })
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	e.setWebhook(rc.srv.URL, rc.secret)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2, func(c *jobs.RuntimeConfig) { c.PollEvery = 300 * time.Millisecond })
	sub := e.Submit("expire my delivery")
	select {
	case <-rc.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery arrived")
	}
	d, _ := e.deliveryOfJob(sub.JobID)
	jobstest.WaitFor(t, 10*time.Second, "the delivery operation to expire", func() bool { return e.Operation(d.OperationID).Status == "expired" })
	close(release)
	d = e.waitDelivery(sub.JobID, 10*time.Second, delivery.Expired)
	e.settled()
	if n := len(rc.requests()); n != 1 {
		t.Errorf("receiver got %d requests, want 1: an expired delivery is never retried", n)
	}
	if d, _ := e.deliveryOfJob(sub.JobID); d.State != delivery.Expired || d.InFlightToken != nil {
		t.Errorf("ledger %+v, want expired without an in-flight marker", d)
	}
	st := e.statusJSON(e.V, d.OperationID)
	if st["status"] != "expired" {
		t.Errorf("status %v", st)
	}
	if got := strings.Join(e.HistoryStatuses(d.OperationID), ","); got != "pending,running,expired" {
		t.Errorf("history %s", got)
	}
}
