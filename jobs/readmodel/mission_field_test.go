package readmodel_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/readmodel"
)

// countKey marks the context whose queries a queryCounter counts.
type countKey struct{}

// queryCounter counts the queries bun runs for contexts marked with countKey.
type queryCounter struct {
	mu      sync.Mutex
	queries []string
}

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

func (q *queryCounter) AfterQuery(ctx context.Context, ev *bun.QueryEvent) {
	if ctx.Value(countKey{}) == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queries = append(q.queries, ev.Query)
}

// during returns the queries fn ran with the marked context.
func (q *queryCounter) during(fn func(ctx context.Context)) []string {
	q.mu.Lock()
	q.queries = nil
	q.mu.Unlock()
	fn(context.WithValue(context.Background(), countKey{}, true))
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.queries...)
}

// The mission field reads the newest 200 prompts of the user in one query, whatever the size of
// the history and however many prompts were retried; the changed drops likewise.
func TestMissionFieldReadsTheNewest200InOneQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	qc := &queryCounter{}
	e.D.Bun.AddQueryHook(qc)
	ctx := context.Background()
	long := strings.Repeat("é", readmodel.MissionTextCap+500)
	var prompts []jobs.Submitted
	for i := range 260 {
		text := fmt.Sprintf("prompt %d", i)
		if i%50 == 7 {
			text = long
		}
		prompts = append(prompts, e.Submit(text))
	}
	// Another user's prompts are never in the field.
	other := jobs.Viewer{OrgID: e.O, UserID: jobstest.CreateUser(t, e.D.Bun, e.O, "member")}
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: other, Prompt: "not mine"}); err != nil {
		t.Fatal(err)
	}
	beforeRetries := time.Now()
	retried := map[uuid.UUID]bool{}
	for i := 100; i < 260; i += 4 {
		p := prompts[i]
		if _, err := e.S.Cancel(ctx, e.V, p.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.S.Retry(ctx, e.V, p.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
		retried[p.PromptID] = true
	}

	var items []readmodel.MissionItem
	queries := qc.during(func(ctx context.Context) {
		var err error
		if _, items, err = e.R.MissionField(ctx, e.V, 200); err != nil {
			t.Fatal(err)
		}
	})
	if len(queries) != 2 {
		t.Errorf("the field took %d queries, want 2 (the watermark and the read): %q", len(queries), queries)
	}
	if len(items) != 200 {
		t.Fatalf("the field holds %d prompts, want the newest 200 of 260", len(items))
	}
	for i, it := range items {
		want := prompts[60+i]
		if it.Prompt.ID != want.PromptID {
			t.Fatalf("item %d is prompt %s, want %s (the newest 200, oldest first)", i, it.Prompt.ID, want.PromptID)
		}
		if it.Prompt.CreatedBy != e.U || it.Job.PromptID != it.Prompt.ID {
			t.Errorf("item %d is not the member's prompt with its job: %+v", i, it)
		}
		if cut := (60+i)%50 == 7; it.TextCut != cut || (cut && it.Prompt.Body != long[:len(strings.Repeat("é", readmodel.MissionTextCap))]) {
			t.Errorf("item %d: cut %v, %d characters", i, it.TextCut, len([]rune(it.Prompt.Body)))
		}
		if retried[it.Prompt.ID] {
			if len(it.Superseded) != 1 || it.Superseded[0].ID != prompts[60+i].JobID || it.Job.Supersedes == nil ||
				*it.Job.Supersedes != prompts[60+i].JobID || it.Job.State != "queued" {
				t.Errorf("retried item %d: job %+v, superseded %+v", i, it.Job, it.Superseded)
			}
		} else if len(it.Superseded) != 0 || it.Job.ID != want.JobID {
			t.Errorf("item %d was never retried: job %s, superseded %+v", i, it.Job.ID, it.Superseded)
		}
	}

	var changed []readmodel.MissionItem
	queries = qc.during(func(ctx context.Context) {
		var err error
		if changed, err = e.R.MissionChanged(ctx, e.V, beforeRetries, nil, 200); err != nil {
			t.Fatal(err)
		}
	})
	if len(queries) != 1 {
		t.Errorf("the changed drops took %d queries, want 1: %q", len(queries), queries)
	}
	if len(changed) != len(retried) {
		t.Errorf("%d prompts changed since the retries began, want the %d retried", len(changed), len(retried))
	}
	for _, it := range changed {
		if !retried[it.Prompt.ID] {
			t.Errorf("prompt %s did not change", it.Prompt.ID)
		}
	}
	all, err := e.R.MissionChanged(ctx, e.V, time.Time{}, nil, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 200 || all[199].Prompt.ID != prompts[259].PromptID {
		t.Errorf("every prompt changed: %d returned, want the newest 200 (a limit above 200 is 200)", len(all))
	}
	two, err := e.R.MissionChanged(ctx, e.V, time.Time{}, []uuid.UUID{prompts[3].PromptID, prompts[120].PromptID, uuid.New()}, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(two) != 2 || two[0].Prompt.ID != prompts[3].PromptID || two[1].Prompt.ID != prompts[120].PromptID {
		t.Errorf("the drops of two ids: %+v", two)
	}
	theirs, err := e.R.MissionChanged(ctx, other, time.Time{}, []uuid.UUID{prompts[3].PromptID}, 200)
	if err != nil || len(theirs) != 0 {
		t.Errorf("another user asking for the member's prompt got %d items (%v)", len(theirs), err)
	}
}
