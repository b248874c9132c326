package views

import (
	"strings"
	"testing"
)

func TestListView(t *testing.T) {
	l := OpsView(OpsFilter{Status: "running"}, true)
	for got, want := range map[string]string{l.RowsID(): "ops-rows", l.EmptyID(): "ops-empty", l.NewerID(): "ops-newer",
		l.CountsID(): "ops-counts", l.NewestPath: "/admin/deferred-operations?status=running"} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if !l.Paged {
		t.Error("OpsView lost paged")
	}
	if j := JobsView(JobsFilter{Q: "x"}, false); j.RowsID() != "jobs-rows" || j.NewestPath != "/admin/jobs" {
		t.Errorf("JobsView = %+v (rows %s)", j, j.RowsID())
	}
	out, _ := render(t, RowPrepend(JobsView(JobsFilter{}, false), JobRowTR(sampleJobs()[0], false, false)))
	if !strings.HasPrefix(out, `<tbody hx-swap-oob="afterbegin:#jobs-rows"><tr id="job-`) {
		t.Errorf("RowPrepend: %.200s", out)
	}
}

// TestOpsFilterFolds: the less used filters fold away unless one is set or was not understood.
func TestOpsFilterFolds(t *testing.T) {
	for name, c := range map[string]struct {
		d    OpsList
		open bool
	}{
		"nothing set":        {OpsList{}, false},
		"a main filter set":  {OpsList{Filter: OpsFilter{Status: "running", Q: "x"}}, false},
		"owner set":          {OpsList{Filter: OpsFilter{Owner: "o"}}, true},
		"bad from":           {OpsList{Errors: map[string]string{"from": "not a date"}}, true},
		"org without column": {OpsList{Filter: OpsFilter{Org: "acme"}}, true},
	} {
		_, doc := render(t, OperationsPage(page(RoleOperator), c.d))
		details := findOne(t, doc, "details")
		if _, open := attr(details, "open"); open != c.open {
			t.Errorf("%s: details open = %v, want %v", name, open, c.open)
		}
	}
}
