package views

import "github.com/a-h/templ"

// The jobs list as the one live list renders it.

// JobsListFragment is the jobs table with its pager (polling fallback and stream snapshot).
func JobsListFragment(d JobsList, oob bool) templ.Component {
	t := listTable{view: JobsView(d.Filter, d.Paged), pollURL: d.Live.PollURL, caption: "Jobs, newest first",
		emptyTitle: "No jobs yet", emptyDetail: "Jobs show up here as soon as a prompt is submitted."}
	t.columns = []listColumn{{"Job", colPlain}, {"State", colPlain}, {"Priority", colFromSM}, {"Attempt", colFromSM}}
	if d.ShowOrg {
		t.columns = append(t.columns, listColumn{"Org", colFromMD})
	}
	t.columns = append(t.columns, listColumn{"Creator", colFromMD}, listColumn{"Time", colPlain}, listColumn{"Error", colFromLG},
		listColumn{"Created", colFromLG})
	for _, r := range d.Rows {
		t.rows = append(t.rows, JobRowTR(r, d.ShowOrg, false))
	}
	if len(d.Filter.Values()) > 0 {
		t.emptyTitle, t.emptyDetail = "No jobs match", "Change or reset the filter; matching jobs show up here as they are created."
	}
	if d.NextCursor != "" {
		t.older = JobsPath(d.Filter, d.NextCursor)
	}
	return liveListTable(t, oob)
}

// JobRowPrepend adds a new job at the top of the table (out of band).
func JobRowPrepend(r JobRow, showOrg bool) templ.Component {
	return RowPrepend(ListView{Name: ListJobs}, JobRowTR(r, showOrg, false))
}

// JobsCounts is the counts bar of the jobs list, out of band.
func JobsCounts(counts []Count) templ.Component {
	return ListCounts(JobsView(JobsFilter{}, false), counts)
}

// jobsFilterForm is the jobs filter.
func jobsFilterForm(d JobsList) filterForm {
	f, e := d.Filter, d.Errors
	form := filterForm{action: "/admin/jobs", label: "Filter jobs", reset: len(f.Values()) > 0}
	form.fields = []filterField{
		{id: "f-q", name: "q", label: "Go to job or prompt id", typ: "search", value: f.Q, placeholder: "a full UUID", errMsg: e["q"], wide: true},
		{id: "f-state", name: "state", label: "State", options: jobStateOptions, value: f.State, errMsg: e["state"]},
	}
	if d.ShowOrg {
		form.fields = append(form.fields, filterField{id: "f-org", name: "org", label: "Organisation", options: withAny("Every organisation", d.Orgs), value: f.Org, errMsg: e["org"]})
	}
	form.fields = append(form.fields, filterField{id: "f-range", name: "range", label: "Created", options: rangeOptions, value: f.Range, errMsg: e["range"]})
	return form
}
