package readmodel_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// The versions of the field are those of MissionField's items: the same newest prompts, oldest
// first, each with its newest job's id, state and updated_at (a retried prompt's new job); and
// MissionPrompts reads in full only the prompts asked for, only the viewer's.
func TestMissionVersionsMatchTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	var prompts []jobs.Submitted
	for range 12 {
		prompts = append(prompts, e.Submit("a prompt"))
	}
	for _, p := range prompts[3:6] {
		if _, err := e.S.Cancel(ctx, e.V, p.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.S.Retry(ctx, e.V, prompts[4].JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	other := jobs.Viewer{OrgID: e.O, UserID: jobstest.CreateUser(t, e.D.Bun, e.O, "member")}
	theirs, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: other, Prompt: "not mine"})
	if err != nil {
		t.Fatal(err)
	}

	asOf, versions, err := e.R.MissionVersions(ctx, e.V, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, items, err := e.R.MissionField(ctx, e.V, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 10 || len(items) != 10 {
		t.Fatalf("%d versions and %d items, want the newest 10 of 12", len(versions), len(items))
	}
	for i, it := range items {
		mv := versions[i]
		if mv.PromptID != it.Prompt.ID || mv.JobID != it.Job.ID || mv.State != it.Job.State || !mv.UpdatedAt.Equal(it.Job.UpdatedAt) {
			t.Errorf("version %d is %+v, the field's item has prompt %s job %s %s at %s", i, mv, it.Prompt.ID, it.Job.ID,
				it.Job.State, it.Job.UpdatedAt)
		}
		if !mv.UpdatedAt.Before(asOf.Add(1)) {
			t.Errorf("version %d changed at %s, after the read's as_of %s", i, mv.UpdatedAt, asOf)
		}
	}
	if versions[2].JobID == prompts[4].JobID || versions[2].State != "queued" {
		t.Errorf("the retried prompt's version is its old job: %+v", versions[2])
	}

	ids := []uuid.UUID{prompts[4].PromptID, prompts[9].PromptID, theirs.PromptID}
	got, err := e.R.MissionPrompts(ctx, e.V, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Prompt.ID != prompts[4].PromptID || got[1].Prompt.ID != prompts[9].PromptID {
		t.Fatalf("MissionPrompts read %d items, want the viewer's 2 asked for, oldest first: %+v", len(got), got)
	}
	if len(got[0].Superseded) != 1 || got[0].Superseded[0].ID != prompts[4].JobID {
		t.Errorf("the retried prompt read in full lacks its superseded job: %+v", got[0].Superseded)
	}
	if none, err := e.R.MissionPrompts(ctx, e.V, nil); err != nil || len(none) != 0 {
		t.Errorf("MissionPrompts of no ids: %v, %v", none, err)
	}
}
