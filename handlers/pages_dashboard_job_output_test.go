package handlers

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/identity"
	"asterion/jobs"
)

// The operator's job page shows what a running job has written so far, escaped, and its
// progress in chunks and tokens; a cancelled job keeps its output there; a queued job has none.
func TestJobPageShowsOutput(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	_, v := e.member(t, "acme", "mona", identity.RoleMember)
	op, _ := e.member(t, "acme", "otto", identity.RoleOperator)
	ctx := context.Background()
	run := e.submit(t, v, "write something")
	e.startRunning(t, run.JobID)
	e.writeChunks(t, run.JobID, 1, "first <i>part</i>", " second", " third")
	queued := e.submit(t, v, "not started")

	for _, path := range []string{"/admin/jobs/" + run.JobID.String(), "/admin/jobs/" + run.JobID.String() + "/panel"} {
		resp, body := op.do(t, get(path))
		wantHTML(t, resp, body, http.StatusOK)
		if !strings.Contains(body, `data-output>first &lt;i&gt;part&lt;/i&gt; second third</div>`) {
			t.Errorf("%s: no output so far in %.3000s", path, body)
		}
		if !strings.Contains(body, "3 chunks · ≈3 tokens") {
			t.Errorf("%s: no progress of 3 chunks and 3 tokens", path)
		}
	}
	if _, err := e.jobs.Cancel(ctx, v, run.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	_, body := op.do(t, get("/admin/jobs/"+run.JobID.String()+"/panel"))
	if !strings.Contains(body, `data-output>first &lt;i&gt;part&lt;/i&gt; second third</div>`) {
		t.Errorf("a cancelled job's page lost its output: %.3000s", body)
	}
	_, body = op.do(t, get("/admin/jobs/"+queued.JobID.String()+"/panel"))
	if strings.Contains(body, "data-output") || strings.Contains(body, `id="job-output"`) {
		t.Errorf("a queued job's page shows an output section")
	}
}

var progressRE = regexp.MustCompile(`(\d+) chunks · ≈(\d+) tokens`)

// The job page's stream tells the page to refresh as the job writes output, not only when its
// state changes: while the job runs, successive refreshes show more and more chunks.
func TestJobPageStreamFollowsOutput(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveOutputConfig(t))
	u := f.user(t, "acme", "mel", identity.RoleMember)
	op := f.user(t, "acme", "olga", identity.RoleOperator)
	// Ten minutes of answer, a word every 20 ms: the job is still running after the
	// three refreshes the test reads, however slow the machine (a 3 s answer could end first).
	sub := f.submit(t, u, "narrate slowly #sim:tokens=30000 #sim:latency=10m")
	f.waitJob(t, u, sub.JobID, "running")
	events := f.openEvents(t, "/admin/jobs/"+sub.JobID+"/events", op.Tok)
	deadline := time.Now().Add(30 * time.Second)
	var counts []int
	for len(counts) < 3 {
		e, ok := events.nextEvent(deadline)
		if !ok {
			t.Fatalf("stream ended after refreshes showing %v chunks", counts)
		}
		if e.Name != "changed" {
			continue
		}
		r := f.do(t, "GET", "/admin/jobs/"+sub.JobID+"/panel", op.Tok, nil)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("panel: %s", r)
		}
		if !strings.Contains(string(r.Body), `data-state="running"`) {
			break
		}
		if m := progressRE.FindStringSubmatch(string(r.Body)); m != nil {
			n, _ := strconv.Atoi(m[1])
			if len(counts) == 0 || n > counts[len(counts)-1] {
				counts = append(counts, n)
			}
		}
	}
	if len(counts) < 3 {
		t.Errorf("while the job ran, the page's refreshes showed %v chunks, want at least three growing counts", counts)
	}
}
