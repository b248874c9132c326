package readmodel_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/readmodel"
)

// TestFilterMatchesAgreesWithTheListQuery: a live list decides with Matches whether a row that
// arrives over the feed belongs on it, the list's query decides with SQL; for every filter the
// dashboard offers, both pick the same rows of a mixed set (two orgs, queued, cancelled and
// scheduled jobs, older and newer).
func TestFilterMatchesAgreesWithTheListQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "member")
	later := time.Now().Add(time.Hour)
	var ids []uuid.UUID
	for i, text := range []string{"plain", "to cancel", "scheduled", "another plain"} {
		sub := e.Submit(text, func(r *jobs.SubmitRequest) {
			if text == "scheduled" {
				r.ScheduledFor = &later
			}
		})
		ids = append(ids, sub.JobID)
		if text == "to cancel" {
			if _, err := e.S.Cancel(ctx, e.V, sub.JobID, jobs.Actor{UserID: &e.U, Name: "member"}); err != nil {
				t.Fatal(err)
			}
		}
		if i == 1 {
			// The rows before this one are made an hour older, for the time conditions.
			if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET created_at = created_at - interval '1 hour' WHERE id IN (?)", ids[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_operation SET accepted_at = accepted_at - interval '1 hour' WHERE id = (SELECT operation_id FROM sa_job WHERE id = ?)", ids[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: otherOrg, UserID: otherUser}, Prompt: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	admin := jobs.Viewer{AllOrgs: true}
	var all []db.Job
	if err := e.D.Bun.NewSelect().Model(&all).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	var allOps []db.Operation
	if err := e.D.Bun.NewSelect().Model(&allOps).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	halfHour := time.Now().Add(-30 * time.Minute)

	jobFilters := map[string]readmodel.JobFilter{
		"none":      {},
		"queued":    {State: jobs.StateQueued},
		"cancelled": {State: jobs.StateCancelled},
		"org":       {OrgID: otherOrg},
		"recent":    {Since: &halfHour},
		"scheduled": {State: jobs.StateQueued, Scheduled: true},
	}
	for name, f := range jobFilters {
		t.Run("jobs "+name, func(t *testing.T) {
			list, _, err := e.R.ListJobs(ctx, admin, f)
			if err != nil {
				t.Fatal(err)
			}
			var want, got []uuid.UUID
			for _, j := range list {
				want = append(want, j.ID)
			}
			for _, j := range all {
				if f.Matches(j, time.Now()) {
					got = append(got, j.ID)
				}
			}
			if len(want) == 0 {
				t.Fatalf("the filter picks no job; the set does not exercise it")
			}
			slices.SortFunc(want, compareUUID)
			slices.SortFunc(got, compareUUID)
			if !slices.Equal(want, got) {
				t.Errorf("Matches picks %v, the list %v", got, want)
			}
		})
	}

	someOp := allOps[0]
	opFilters := map[string]readmodel.OperationFilter{
		"none":      {},
		"pending":   {Status: "pending"},
		"cancelled": {Status: "cancelled"},
		"kind":      {Kind: "prompt.execute"},
		"org":       {OrgID: otherOrg},
		"from":      {From: &halfHour},
		"to":        {To: &halfHour},
		"search":    {Search: someOp.ID.String()},
	}
	for name, f := range opFilters {
		t.Run("operations "+name, func(t *testing.T) {
			list, _, err := e.R.ListOperations(ctx, admin, f)
			if err != nil {
				t.Fatal(err)
			}
			var want, got []uuid.UUID
			for _, op := range list {
				want = append(want, op.ID)
			}
			for _, op := range allOps {
				if f.Matches(op) {
					got = append(got, op.ID)
				}
			}
			if len(want) == 0 {
				t.Fatalf("the filter picks no operation; the set does not exercise it")
			}
			slices.SortFunc(want, compareUUID)
			slices.SortFunc(got, compareUUID)
			if !slices.Equal(want, got) {
				t.Errorf("Matches picks %v, the list %v", got, want)
			}
		})
	}
}

func compareUUID(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) }
