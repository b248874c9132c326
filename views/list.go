package views

import "github.com/a-h/templ"

// The one live list of the operator dashboard, which the operations and the jobs lists both
// are: a filter form, a counts bar, the page's stream, a table whose rows the stream swaps in
// place or prepends, and a pager. What differs between the two lists is data: the names of
// the elements, the columns, the rows and the filter's fields.

// The names of the dashboard's live lists: the prefix of their element ids.
const (
	ListOperations = "ops"
	ListJobs       = "jobs"
)

// ListView names one live list's elements and links, for the page and for its stream.
type ListView struct {
	// Name is ListOperations or ListJobs.
	Name string
	// CountsLabel is the heading of the counts bar.
	CountsLabel string
	// NewestPath is the list's first page with its filter.
	NewestPath string
	// Paged is true when the list shows a later page (new rows are not prepended then).
	Paged bool
}

// RowsID is the id of the table body that rows are prepended to.
func (l ListView) RowsID() string { return l.Name + "-rows" }

// EmptyID is the id of the empty-table placeholder row.
func (l ListView) EmptyID() string { return l.Name + "-empty" }

// NewerID is the id of the notice counting newer rows that a full live list does not show.
func (l ListView) NewerID() string { return l.Name + "-newer" }

// CountsID is the id of the counts bar.
func (l ListView) CountsID() string { return l.Name + "-counts" }

// OpsView is how the operations list with filter f names its elements.
func OpsView(f OpsFilter, paged bool) ListView {
	return ListView{Name: ListOperations, CountsLabel: "Operations by status", NewestPath: OpsPath(f, ""), Paged: paged}
}

// JobsView is how the jobs list with filter f names its elements.
func JobsView(f JobsFilter, paged bool) ListView {
	return ListView{Name: ListJobs, CountsLabel: "Jobs by state", NewestPath: JobsPath(f, ""), Paged: paged}
}

// listTable is what the list's table shows.
type listTable struct {
	view    ListView
	pollURL string
	caption string
	columns []listColumn
	rows    []templ.Component
	// emptyTitle and emptyDetail fill the table when there are no rows.
	emptyTitle, emptyDetail string
	// older is the next page's path, "" on the last page.
	older string
}

// listColumn is one column heading with its classes (colPlain, or hidden below a breakpoint).
type listColumn struct {
	label, class string
}

// The classes of a column heading, written out whole so that Tailwind's scan of views/ finds
// them.
const (
	colPlain  = "px-3 py-2 font-medium"
	colFromSM = "hidden px-3 py-2 font-medium sm:table-cell"
	colFromMD = "hidden px-3 py-2 font-medium md:table-cell"
	colFromLG = "hidden px-3 py-2 font-medium lg:table-cell"
)

// filterForm is a list's filter: a plain GET form that works without JavaScript. Fields in
// more fold away under moreLabel unless moreOpen.
type filterForm struct {
	action, label string
	fields        []filterField
	more          []filterField
	moreLabel     string
	moreOpen      bool
	// reset shows the link back to the unfiltered list.
	reset bool
}

// filterField is one field of a filter form: a select when options are set, else an input of
// type typ.
type filterField struct {
	id, name, label, typ string
	options              []Option
	value, placeholder   string
	errMsg               string
	// wide spans two columns.
	wide bool
}

// RowPrepend adds row at the top of the list's table (out of band).
func RowPrepend(l ListView, row templ.Component) templ.Component { return rowPrepend(l.RowsID(), row) }

// ListCounts is the counts bar of a list, out of band.
func ListCounts(l ListView, counts []Count) templ.Component {
	return countsBar(l.CountsID(), l.CountsLabel, counts, true)
}
