package views

import "github.com/a-h/templ"

// The operations list as the one live list renders it.

// OpsListFragment is the table of operations with its pager; the polling fallback refreshes
// it, and a stream snapshot replaces it out of band.
func OpsListFragment(d OpsList, oob bool) templ.Component {
	t := listTable{view: OpsView(d.Filter, d.Paged), pollURL: d.Live.PollURL, caption: "Deferred operations, newest first",
		emptyTitle: "No operations yet", emptyDetail: "Operations show up here as soon as work is submitted."}
	t.columns = []listColumn{{"Operation", colPlain}, {"Status", colPlain}, {"Kind", colFromMD}, {"Owner", colFromLG}}
	if d.ShowOrg {
		t.columns = append(t.columns, listColumn{"Org", colFromSM})
	}
	t.columns = append(t.columns, listColumn{"Accepted", colPlain}, listColumn{"Updated", colFromSM}, listColumn{"Expires", colFromMD},
		listColumn{"Last error", colFromLG})
	for _, r := range d.Rows {
		t.rows = append(t.rows, OpRowTR(r, d.ShowOrg, false))
	}
	if d.Filter.Active() {
		t.emptyTitle, t.emptyDetail = "No operations match", "Change or reset the filter; matching operations show up here as they are accepted."
	}
	if d.NextCursor != "" {
		t.older = OpsPath(d.Filter, d.NextCursor)
	}
	return liveListTable(t, oob)
}

// OpRowPrepend adds a new operation at the top of the table (out of band).
func OpRowPrepend(r OpRow, showOrg bool) templ.Component {
	return RowPrepend(ListView{Name: ListOperations}, OpRowTR(r, showOrg, false))
}

// OpsCounts is the counts bar of the operations list, out of band.
func OpsCounts(counts []Count) templ.Component {
	return ListCounts(OpsView(OpsFilter{}, false), counts)
}

// opsFilterForm is the operations filter; the less used filters fold away unless one of them
// is set or was not understood.
func opsFilterForm(d OpsList) filterForm {
	f, e := d.Filter, d.Errors
	form := filterForm{action: "/admin/deferred-operations", label: "Filter operations", reset: f.Active(),
		moreLabel: "More filters: owner, organisation, time"}
	form.fields = []filterField{
		{id: "f-q", name: "q", label: "Operation or correlation id", typ: "search", value: f.Q, placeholder: "a full UUID", errMsg: e["q"], wide: true},
		{id: "f-status", name: "status", label: "Status", options: opStatusOptions, value: f.Status, errMsg: e["status"]},
		{id: "f-kind", name: "kind", label: "Kind", options: withAny("Any kind", d.Kinds), value: f.Kind, errMsg: e["kind"]},
	}
	form.more = []filterField{{id: "f-owner", name: "owner", label: "Owner", typ: "text", value: f.Owner, placeholder: "e.g. asterion.jobs", errMsg: e["owner"]}}
	if d.ShowOrg {
		form.more = append(form.more, filterField{id: "f-org", name: "org", label: "Organisation", options: withAny("Every organisation", d.Orgs), value: f.Org, errMsg: e["org"]})
	}
	form.more = append(form.more,
		filterField{id: "f-range", name: "range", label: "Accepted", options: rangeOptions, value: f.Range, errMsg: e["range"]},
		filterField{id: "f-from", name: "from", label: "From (UTC)", typ: "datetime-local", value: f.From, errMsg: e["from"]},
		filterField{id: "f-to", name: "to", label: "Until (UTC)", typ: "datetime-local", value: f.To, errMsg: e["to"]},
	)
	form.moreOpen = f.Org != "" || e["org"] != ""
	for _, fl := range form.more {
		if fl.value != "" || fl.errMsg != "" {
			form.moreOpen = true
		}
	}
	return form
}
