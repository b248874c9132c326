package handlers

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/readmodel"
)

// promptQueries counts the queries bun runs that read prompts or jobs, and apart from them
// those of the ETA estimator (its place read names asterion_band; its rate sample, at most
// once a second, counts the last minute's finishes).
type promptQueries struct {
	mu     sync.Mutex
	n, eta int
}

func (q *promptQueries) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

func (q *promptQueries) AfterQuery(_ context.Context, ev *bun.QueryEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case strings.Contains(ev.Query, "asterion_band") || strings.Contains(ev.Query, "interval '60 seconds'") ||
		strings.Contains(ev.Query, "sa_job_count"):
		q.eta++
	case strings.Contains(ev.Query, "sa_entity") || strings.Contains(ev.Query, "sa_job"):
		q.n++
	}
}

func (q *promptQueries) takeETA() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.eta
	q.eta = 0
	return n
}

func (q *promptQueries) take() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.n
	q.n = 0
	return n
}

// The page and the polling fragment hold the newest 200 prompts of a user with more, read with
// one query of prompts and jobs however many were retried; a long text is cut.
func TestMissionPageAndDropsReadTheNewest200Once(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	b, v := e.member(t, "acme", "hoarder", identity.RoleMember)
	ctx := context.Background()
	long := strings.Repeat("x", readmodel.MissionTextCap) + "THE-TAIL-OF-A-LONG-PROMPT"
	var subs []jobs.Submitted
	for i := range 230 {
		text := "short prompt"
		if i == 229 {
			text = long
		}
		subs = append(subs, e.submit(t, v, text))
	}
	for _, s := range subs[200:220] {
		if _, err := e.jobs.Cancel(ctx, v, s.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.jobs.Retry(ctx, v, s.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	qc := &promptQueries{}
	e.db.Bun.AddQueryHook(qc)
	for _, path := range []string{"/mission", "/mission/drops", "/mission/drops?since=1970-01-01T00:00:00Z"} {
		qc.take()
		qc.takeETA()
		resp, body := b.do(t, get(path))
		wantHTML(t, resp, body, http.StatusOK)
		if n := qc.take(); n != 1 {
			t.Errorf("%s read prompts and jobs in %d queries, want 1", path, n)
		}
		// The estimates of all 200 queued drops: one place read and at most one rate sample.
		if n := qc.takeETA(); n < 1 || n > 2 {
			t.Errorf("%s read the estimates in %d queries, want one for the field (and one rate sample)", path, n)
		}
		tags := dropTags(body)
		if len(tags) != 200 {
			t.Errorf("%s holds %d drops, want the newest 200 of 230", path, len(tags))
		}
		for _, s := range subs[:30] {
			if _, ok := tags[s.PromptID.String()]; ok {
				t.Errorf("%s holds prompt %s, older than the newest 200", path, s.PromptID)
			}
		}
		if strings.Contains(body, "THE-TAIL-OF-A-LONG-PROMPT") || !strings.Contains(body, missionCutMark) {
			t.Errorf("%s shows the whole of a prompt longer than %d characters", path, readmodel.MissionTextCap)
		}
		if !strings.Contains(body, subs[210].JobID.String()) {
			t.Errorf("%s does not list the superseded job of a retried prompt", path)
		}
	}
}
