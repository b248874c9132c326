package batch

import (
	"context"
	"slices"
	"testing"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestListFiles: a member lists its own files and no other member's, an operator every file of
// its org, an admin those of its own org only; pages follow (created_at, id) in either order,
// files of one instant included, without a file twice or left out; purpose filters; a bad
// limit, order or after is an invalid parameter.
func TestListFiles(t *testing.T) {
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	b := textBatches(t, e)
	peer := jobs.Viewer{OrgID: e.O, UserID: jobstest.CreateUser(t, e.D.Bun, e.O, "member")}
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "member")
	other := jobs.Viewer{OrgID: otherOrg, UserID: otherUser}
	admin := jobs.Viewer{OrgID: otherOrg, UserID: jobstest.CreateUser(t, e.D.Bun, otherOrg, "admin"), OrgWide: true, AllOrgs: true}

	line := []byte(`{"custom_id":"c","method":"POST","url":"/v1/text","body":{"text":"x"}}` + "\n")
	upload := func(v jobs.Viewer) string {
		t.Helper()
		f, err := b.Upload(ctx, v, form(t, line))
		if err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	var mine []string // the member's files, oldest first
	for range 5 {
		mine = append(mine, upload(e.V))
	}
	// Three files of one instant: the order among them is their ids'.
	if _, err := e.D.Bun.ExecContext(ctx,
		"UPDATE sa_file SET created_at = (SELECT created_at FROM sa_file WHERE id = ?) WHERE id IN (?, ?)",
		mine[1], mine[2], mine[3]); err != nil {
		t.Fatal(err)
	}
	slices.Sort(mine[1:4])
	peers := upload(peer)
	others := upload(other)
	// The output file of the member's batch is the member's, as finalize writes it.
	if _, err := e.D.Bun.ExecContext(ctx, `INSERT INTO sa_file (id, org_id, created_by, purpose, filename)
		VALUES ('file-output', ?, ?, ?, 'out.jsonl')`, e.O, e.U, PurposeBatchOutput); err != nil {
		t.Fatal(err)
	}
	mine = append(mine, "file-output")

	ids := func(p FilePage) []string {
		var out []string
		for _, f := range p.Files {
			out = append(out, f.ID)
		}
		return out
	}
	list := func(v jobs.Viewer, q FileQuery) FilePage {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = DefaultFileLimit
		}
		p, err := b.ListFiles(ctx, v, q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		return p
	}
	newestFirst := slices.Clone(mine)
	slices.Reverse(newestFirst)
	if got := ids(list(e.V, FileQuery{})); !slices.Equal(got, newestFirst) {
		t.Errorf("the member's list: %v, want %v", got, newestFirst)
	}
	orgs := append(append(slices.Clone(mine[:5]), peers), "file-output")
	if got := ids(list(e.Op, FileQuery{Order: OrderAsc})); !slices.Equal(got, orgs) {
		t.Errorf("the operator's list, oldest first: %v, want the org's %v", got, orgs)
	}
	if got := ids(list(other, FileQuery{})); !slices.Equal(got, []string{others}) {
		t.Errorf("the other org's member: %v, want its own %s", got, others)
	}
	if got := ids(list(admin, FileQuery{})); !slices.Equal(got, []string{others}) {
		t.Errorf("an admin: %v, want its own org's %s only", got, others)
	}
	if got := ids(list(e.V, FileQuery{Purpose: PurposeBatchOutput})); !slices.Equal(got, []string{"file-output"}) {
		t.Errorf("purpose batch_output: %v", got)
	}
	if got := ids(list(e.V, FileQuery{Purpose: "fine-tune"})); len(got) != 0 {
		t.Errorf("purpose fine-tune: %v, want none", got)
	}

	for _, order := range []string{OrderAsc, OrderDesc} {
		want := mine
		if order == OrderDesc {
			want = newestFirst
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("%s: more pages than files", order)
			}
			p := list(e.V, FileQuery{Order: order, After: after, Limit: 2})
			got = append(got, ids(p)...)
			if !p.HasMore {
				break
			}
			after = p.Files[len(p.Files)-1].ID
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s by pages of 2: %v, want %v", order, got, want)
		}
	}

	for name, c := range map[string]struct {
		v     jobs.Viewer
		q     FileQuery
		param string
	}{
		"limit 0":                  {e.V, FileQuery{Limit: 0}, "limit"},
		"limit past the most":      {e.V, FileQuery{Limit: MaxFileLimit + 1}, "limit"},
		"another order":            {e.V, FileQuery{Limit: 1, Order: "newest"}, "order"},
		"an unknown after":         {e.V, FileQuery{Limit: 1, After: "file-nope"}, "after"},
		"another member's after":   {e.V, FileQuery{Limit: 1, After: peers}, "after"},
		"another org's after":      {e.Op, FileQuery{Limit: 1, After: others}, "after"},
		"an admin's foreign after": {admin, FileQuery{Limit: 1, After: mine[0]}, "after"},
	} {
		_, err := b.ListFiles(ctx, c.v, c.q)
		inv, ok := err.(*InvalidError)
		if !ok || inv.Param != c.param || inv.Code != "invalid_value" {
			t.Errorf("%s: %v, want an invalid %s", name, err, c.param)
		}
	}
}
