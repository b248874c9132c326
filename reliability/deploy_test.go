package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestRollingDeploy runs two `asterion serve` processes (each with its worker pool) and one
// `asterion run-worker` and, while prompts of 8 s (`#sim:latency=8s`) with max_attempts 1 run on
// them, stops each with SIGTERM and starts it again, twice in turn, with a shutdown grace far shorter than the calls, so every
// stop really cuts calls. At the end, by SQL and over the API: every prompt succeeded with one
// response (the exactly-once rules), no attempt was spent by a stop (a max_attempts of 1 sufficed,
// no job failed or was counted a worker crash), every stop exited cleanly, and the cut runs are
// listed in their job's attempts with error_kind shutdown.
//
// Size: ASTERION_RELIABILITY_DEPLOY_PROMPTS prompts (short 40, long 200) and
// ASTERION_RELIABILITY_DEPLOY_ROUNDS rounds of restarting both processes (short 2, long 4).
func TestRollingDeploy(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	n := pickInt(t, "ASTERION_RELIABILITY_DEPLOY_PROMPTS", 40, 200)
	// Each process can hold every prompt, so that one process takes all that another hands back.
	rounds := pickInt(t, "ASTERION_RELIABILITY_DEPLOY_ROUNDS", 2, 4)
	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	dbURL := d.URL.String()
	env := map[string]string{
		"ASTERION_LOG_LEVEL":          "info",
		"ASTERION_WORKERS":            fmt.Sprint(n),
		"ASTERION_SHUTDOWN_GRACE":     "1s",
		"ASTERION_HEARTBEAT_INTERVAL": "250ms",
		"ASTERION_STALE_AFTER":        "5s",
		"ASTERION_RECLAIM_EVERY":      "1s",
		"ASTERION_JOB_TIMEOUT":        "30s",
	}
	var (
		mu    sync.Mutex
		all   []*proc
		slots [2]*server
	)
	start := func(i, gen int) {
		s := startServe(t, fmt.Sprintf("serve-%d-%d", i, gen), dbURL, env)
		mu.Lock()
		slots[i] = s
		all = append(all, s.proc)
		mu.Unlock()
	}
	start(0, 0)
	start(1, 0)
	// A run-worker process beside them is stopped and started the same way: the other door to
	// the same pool code.
	worker := startWorker(t, "run-worker-0", dbURL, env)
	all = append(all, worker)

	ctx := context.Background()
	var accepted []submitResult
	for i := range n {
		a := newAPI(t, slots[i%2].base, m.Token)
		r := a.submit(ctx, fmt.Sprintf("deploy prompt %d #sim:latency=8s", i), map[string]any{"max_attempts": 1})
		if r.Err != nil {
			t.Fatalf("submit %d: %v", i, r.Err)
		}
		accepted = append(accepted, r)
	}

	// Roll: stop one process (SIGTERM), start it again, then the other; a process is stopped
	// only while it runs calls, so the stop cuts them.
	begin := time.Now()
	stops := 0
	for round := range rounds {
		for i := range slots {
			victim := slots[i]
			id := workerID(t, victim.proc)
			dbtest.WaitForDetail(t, 60*time.Second, victim.name+" to run calls", func() (bool, string) {
				k, err := queryInt(ctx, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'running' AND worker_claim LIKE ?", id+"/%")
				if err != nil {
					return false, err.Error()
				}
				return k > 0, fmt.Sprintf("%d running", k)
			})
			victim.stop()
			stops++
			if victim.waitErr != nil {
				t.Errorf("%s did not exit cleanly on SIGTERM: %v", victim.name, victim.waitErr)
			}
			start(i, round+1)
		}
		id := workerID(t, worker)
		dbtest.WaitForDetail(t, 60*time.Second, worker.name+" to run calls", func() (bool, string) {
			k, err := queryInt(ctx, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'running' AND worker_claim LIKE ?", id+"/%")
			if err != nil {
				return false, err.Error()
			}
			return k > 0, fmt.Sprintf("%d running", k)
		})
		worker.stop()
		stops++
		if worker.waitErr != nil {
			t.Errorf("%s did not exit cleanly on SIGTERM: %v", worker.name, worker.waitErr)
		}
		worker = startWorker(t, fmt.Sprintf("run-worker-%d", round+1), dbURL, env)
		mu.Lock()
		all = append(all, worker)
		mu.Unlock()
	}
	dbtest.WaitForDetail(t, 3*time.Minute, "every prompt to end", func() (bool, string) {
		open, err := queryInt(ctx, d.Bun, "SELECT count(*) FROM sa_job WHERE state NOT IN "+terminalStates)
		if err != nil {
			return false, err.Error()
		}
		counts, _ := stateCounts(ctx, d.Bun)
		return open == 0, fmt.Sprintf("job states %v", counts)
	})
	checkAcceptedJobs(t, d.Bun, accepted)
	checkExactlyOnce(t, d.Bun)
	if bad := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state <> 'succeeded'"); bad != 0 {
		counts, _ := stateCounts(ctx, d.Bun)
		t.Errorf("%d jobs did not succeed after a rolling deploy (states %v): a stop must cost nothing but time", bad, counts)
	}
	if crashed := mustInt(t, d.Bun, "SELECT count(*) FROM sa_attempt WHERE error_kind IS DISTINCT FROM 'shutdown' AND error_kind IS NOT NULL"); crashed != 0 {
		t.Errorf("%d attempts ended in an error other than shutdown", crashed)
	}
	cut := mustInt(t, d.Bun, "SELECT count(*) FROM sa_attempt WHERE error_kind = 'shutdown'")
	handedBack := mustInt(t, d.Bun, "SELECT count(*) FROM sa_audit WHERE action = 'job.handed_back'")
	if cut == 0 {
		t.Fatalf("no run was cut by the %d stops: the test proved nothing", stops)
	}
	if cut != handedBack {
		t.Errorf("%d cut runs recorded but %d hand-backs audited", cut, handedBack)
	}
	// Over the API: a job that was cut lists the cut run with its kind and usage.
	var jobID string
	if err := d.Bun.QueryRowContext(ctx, "SELECT job_id::text FROM sa_attempt WHERE error_kind = 'shutdown' LIMIT 1").Scan(&jobID); err != nil {
		t.Fatal(err)
	}
	doc := getJob(t, slots[0].base, m.Token, jobID)
	var kinds []string
	for _, a := range doc.Attempts {
		k := "null"
		if a.ErrorKind != nil {
			k = *a.ErrorKind
		}
		kinds = append(kinds, k)
	}
	if doc.State != "succeeded" || !strings.Contains(strings.Join(kinds, ","), "shutdown") || kinds[len(kinds)-1] != "null" {
		t.Errorf("job %s over the API: state %s, attempts %v; want succeeded, a shutdown run, then the answer", jobID, doc.State, kinds)
	}
	mu.Lock()
	checkNoPanic(t, all...)
	mu.Unlock()
	t.Logf("%d prompts of 8 s, %d SIGTERM stops in %d rounds, %d runs cut and handed back; all succeeded %s after the first stop",
		n, stops, rounds, cut, time.Since(begin).Round(time.Second))
}

// jobDoc is the part of GET /sa-core/v1/jobs/{id} the suite reads.
type jobDoc struct {
	State    string `json:"state"`
	Attempt  int    `json:"attempt"`
	Attempts []struct {
		Attempt   int     `json:"attempt"`
		ErrorKind *string `json:"error_kind"`
		Usage     struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	} `json:"attempts"`
}

// getJob reads a job document over the API.
func getJob(t *testing.T, base, token, id string) jobDoc {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/sa-core/v1/jobs/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("get job %s: %v", id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get job %s: %d %s", id, resp.StatusCode, truncate(string(body), 300))
	}
	var doc jobDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("decode job %s: %v", id, err)
	}
	return doc
}
