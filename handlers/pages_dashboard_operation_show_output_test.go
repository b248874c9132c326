package handlers

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

// outputTextRE finds the output so far on a detail page.
var outputTextRE = regexp.MustCompile(`data-output>([^<]*)</div>`)

// The page of a running prompt operation shows its job's output so far and grows live: its
// stream says "changed" as the job writes, each refresh of the panel shows more chunks and
// more text, and a reload shows the text so far. Another org's operator gets 404 on the page,
// its panel and its stream; a member gets 403.
func TestOperationPageFollowsItsJobsOutput(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveOutputConfig(t))
	u := f.user(t, "acme", "mel", identity.RoleMember)
	op := f.user(t, "acme", "olga", identity.RoleOperator)
	stranger := f.user(t, "globex", "gus", identity.RoleOperator)
	// Ten minutes of answer, a word every 20 ms: the job is still running after the
	// three refreshes the test reads, however slow the machine (a 3 s answer could end first).
	sub := f.submit(t, u, "narrate slowly #sim:tokens=30000 #sim:latency=10m")
	path := "/admin/deferred-operations/" + operationOf(t, sub.Operation)
	f.waitJob(t, u, sub.JobID, "running")

	for _, p := range []string{path, path + "/panel", path + "/events"} {
		if r := f.do(t, "GET", p, stranger.Tok, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("another org's operator on %s: %d, want 404", p, r.StatusCode)
		}
		if r := f.do(t, "GET", p, u.Tok, nil); r.StatusCode != http.StatusForbidden {
			t.Errorf("a member on %s: %d, want 403", p, r.StatusCode)
		}
	}

	events := f.openEvents(t, path+"/events", op.Tok)
	deadline := time.Now().Add(30 * time.Second)
	var counts []int
	var texts []string
	for len(counts) < 3 {
		e, ok := events.nextEvent(deadline)
		if !ok {
			t.Fatalf("stream ended after refreshes showing %v chunks", counts)
		}
		if e.Name != "changed" {
			continue
		}
		r := f.do(t, "GET", path+"/panel", op.Tok, nil)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("panel: %s", r)
		}
		body := string(r.Body)
		if !strings.Contains(body, `id="op-status" data-status="running"`) {
			break
		}
		m, out := progressRE.FindStringSubmatch(body), outputTextRE.FindStringSubmatch(body)
		if m == nil || out == nil {
			continue
		}
		if n, _ := strconv.Atoi(m[1]); len(counts) == 0 || n > counts[len(counts)-1] {
			if len(texts) > 0 && !strings.HasPrefix(out[1], texts[len(texts)-1]) {
				t.Errorf("the output went from %q to %q: it should only grow", texts[len(texts)-1], out[1])
			}
			counts, texts = append(counts, n), append(texts, out[1])
		}
		if len(counts) == 2 {
			// A reload in the middle of the run shows the text so far.
			page := f.do(t, "GET", path, op.Tok, nil)
			got := outputTextRE.FindStringSubmatch(string(page.Body))
			if page.StatusCode != http.StatusOK || got == nil || !strings.HasPrefix(got[1], texts[1]) {
				t.Errorf("a reload while the job runs: %d, output %q, want at least %q", page.StatusCode, got, texts[1])
			}
		}
	}
	if len(counts) < 3 || texts[len(texts)-1] == "" {
		t.Errorf("while the job ran, the page's refreshes showed %v chunks, want at least three growing counts", counts)
	}
}
