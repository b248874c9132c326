package reliability

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestAmbiguousCommitMakesNoDuplicate runs `asterion serve --no-worker` behind a TCP proxy that
// cuts the database connection at the COMMIT of one in three transactions that insert a job,
// alternately after forwarding the COMMIT (it commits; the server cannot know) and before (it
// rolls back), while many clients submit at once so that submits share transactions; one
// `asterion run-worker` runs the jobs on a direct connection. Afterwards: every 202 has its job,
// no prompt text was written twice and no prompt has two jobs (no shared transaction was replayed
// as new jobs), every job ran exactly once, and at least one shared transaction that committed
// behind a cut connection was answered as accepted.
//
// Size: ASTERION_RELIABILITY_AMBIGUOUS_PROMPTS submits (short 400, long 3000).
func TestAmbiguousCommitMakesNoDuplicate(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	n := pickInt(t, "ASTERION_RELIABILITY_AMBIGUOUS_PROMPTS", 400, 3000)
	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	proxy := startCommitCutProxy(t, d.URL.Addr(), 3)
	proxied, err := url.Parse(d.URL.String())
	if err != nil {
		t.Fatal(err)
	}
	proxied.Host = proxy.addr()
	env := map[string]string{
		"ASTERION_LOG_LEVEL":   "warn",
		"ASTERION_SIM_LATENCY": "1ms-20ms",
		"ASTERION_WORKERS":     "20",
	}
	srv := startServe(t, "serve", proxied.String(), env, "--no-worker")
	worker := startWorker(t, "run-worker", d.URL.String(), env)
	client := newAPI(t, srv.base, m.Token)

	ctx := context.Background()
	var accepted acceptedSet
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	var next int
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				r := client.submit(ctx, fmt.Sprintf("ambiguous commit prompt %d", i), nil)
				mu.Lock()
				statuses[r.Status]++
				mu.Unlock()
				if r.Err == nil {
					accepted.add(r)
				}
			}
		}()
	}
	wg.Wait()
	dbtest.WaitForDetail(t, 3*time.Minute, "every job to end", func() (bool, string) {
		open, err := queryInt(ctx, d.Bun, "SELECT count(*) FROM sa_job WHERE state NOT IN "+terminalStates)
		if err != nil {
			return false, err.Error()
		}
		counts, _ := stateCounts(ctx, d.Bun)
		return open == 0, fmt.Sprintf("job states %v", counts)
	})
	acc := accepted.all()
	checkAcceptedJobs(t, d.Bun, acc)
	if k := mustInt(t, d.Bun, `SELECT count(*) FROM (SELECT body FROM sa_entity WHERE kind = 'prompt'
 GROUP BY body HAVING count(*) > 1) x`); k != 0 {
		t.Errorf("%d prompt texts were written twice: a submit was replayed after an ambiguous commit", k)
	}
	checkExactlyOnce(t, d.Bun)
	recovered := strings.Count(srv.logText(), "a shared submit transaction failed but committed")
	if proxy.forwarded.Load() == 0 {
		t.Fatalf("the proxy never cut a connection after a COMMIT (%d candidates): the test proved nothing", proxy.candidates.Load())
	}
	if recovered == 0 {
		t.Errorf("no shared transaction that committed behind a cut connection was recovered (%d cuts after COMMIT): the test proved nothing",
			proxy.forwarded.Load())
	}
	checkNoPanic(t, srv.proc, worker)
	t.Logf("%d submits: %d accepted, answers by status %v; the proxy cut %d connections after a COMMIT and %d before one (of %d job-writing commits); %d shared transactions were found committed and answered as accepted",
		n, len(acc), statuses, proxy.forwarded.Load(), proxy.dropped.Load(), proxy.candidates.Load(), recovered)
}
