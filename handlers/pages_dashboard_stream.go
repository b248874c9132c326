package handlers

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/views"
)

// The dashboard's live streams. Each page opens one EventSource. A list stream starts every
// connection with a snapshot of the rows the page shows (its filter and page, re-read), then
// sends each changed row as an out-of-band <tr> swap and prepends new matching rows on the
// first page; counts follow at most once a second. A detail stream sends "changed", on
// connect and when its object changes, and the page refetches its panel. The stream carries no
// event ids: a reconnect gets a fresh snapshot instead of a replay.

// dashLiveRowCap is the most rows a live list holds: past it, new matching rows are counted in
// a notice linking to the newest page instead of being prepended, so the page stays light.
const dashLiveRowCap = 200

// pageStreamer is one page's side of a stream.
type pageStreamer interface {
	// snapshot writes what the page shows now; it runs on every connect and after the stream
	// fell behind.
	snapshot(ctx context.Context, w *bufio.Writer) error
	// event handles one change-feed event inside the stream's scope.
	event(ctx context.Context, w *bufio.Writer, e feed.Event) error
	// tick runs every tickEvery, for coalesced updates.
	tick(ctx context.Context, w *bufio.Writer) error
	tickEvery() time.Duration
}

// pageStream runs a dashboard page's stream: a browser reconnects after 1 s, and every
// connect, like every resync after a lag, starts from a fresh snapshot.
func (s *Server) pageStream(c *fiber.Ctx, scope feed.Scope, ps pageStreamer) {
	s.serveStream(c, scope, snapshotStreamer{ps})
}

// snapshotStreamer adapts a pageStreamer to serveStream.
type snapshotStreamer struct{ pageStreamer }

func (p snapshotStreamer) open(ctx context.Context, w *bufio.Writer) error {
	if _, err := w.WriteString("retry: 1000\n\n"); err != nil {
		return err
	}
	return p.snapshot(ctx, w)
}

func (p snapshotStreamer) resync(ctx context.Context, w *bufio.Writer) error {
	return p.snapshot(ctx, w)
}

func (p snapshotStreamer) drained(context.Context, *bufio.Writer) error { return nil }

// writeSSE writes one event whose data is the rendered component, one data line per line.
func writeSSE(ctx context.Context, w *bufio.Writer, name string, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		return err
	}
	return writeSSEData(w, name, buf.Bytes())
}

// liveList is one dashboard list (operations or jobs) as its stream and its polling fallback
// see it: what differs between lists. T is the list's row model.
type liveList[T any] interface {
	// load reads the page the list shows.
	load(ctx context.Context) (listPage[T], error)
	// item is the row an event is about, as of that event; false when the event is about none.
	item(ctx context.Context, e feed.Event) (T, bool, error)
	// key is the row's id and org.
	key(item T) (id uuid.UUID, orgID, createdBy int64)
	// matches reports whether the row passes the list's filter.
	matches(item T) bool
	// row is the row swapped in place, marked stale when it no longer matches.
	row(ctx context.Context, item T, stale bool) templ.Component
	// prepend adds the row at the top of the list.
	prepend(ctx context.Context, item T) templ.Component
	// counts reads the counts bar, from a read that started at or after notBefore.
	counts(ctx context.Context, notBefore time.Time) ([]views.Count, error)
	// view names the list's elements and links.
	view() views.ListView
}

// listPage is one read of a list: the rows it shows and the fragment rendering them.
type listPage[T any] struct {
	items  []T
	counts []views.Count
	// fragment is the table with its pager, marked for an out-of-band swap when oob.
	fragment func(oob bool) templ.Component
}

// listFragment answers a list's polling fallback: the table fragment, with the counts out of
// band.
func listFragment[T any](s *Server, c *fiber.Ctx, l liveList[T]) error {
	page, err := l.load(c.UserContext())
	if err != nil {
		return s.dashError(c, err, "page")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if err := render(c, page.fragment(false)); err != nil {
		return err
	}
	return views.ListCounts(l.view(), page.counts).Render(c.UserContext(), c.Response().BodyWriter())
}

// listStreamer keeps a dashboard list live.
type listStreamer[T any] struct {
	s       *Server
	v       jobs.Viewer
	list    liveList[T]
	visible map[uuid.UUID]bool
	dirty   bool
	counts  string
	// changedAt is when the newest event arrived: counts must be read after it.
	changedAt time.Time
	// newer counts matching rows not prepended because the page holds rowCap rows.
	newer int
	// rowCap overrides dashLiveRowCap (tests).
	rowCap int
}

// streamList serves the stream of a list for the viewer v on the topics of its rows.
func streamList[T any](s *Server, c *fiber.Ctx, v jobs.Viewer, l liveList[T], topics ...string) {
	scope := v.Scope()
	scope.Topics = topics
	s.pageStream(c, scope, &listStreamer[T]{s: s, v: v, list: l})
}

func (o *listStreamer[T]) tickEvery() time.Duration { return time.Second }

func (o *listStreamer[T]) snapshot(ctx context.Context, w *bufio.Writer) error {
	page, err := o.list.load(ctx)
	if err != nil {
		return err
	}
	o.visible, o.newer = make(map[uuid.UUID]bool, len(page.items)), 0
	for _, it := range page.items {
		id, _, _ := o.list.key(it)
		o.visible[id] = true
	}
	if err := writeSSE(ctx, w, "snapshot", page.fragment(true)); err != nil {
		return err
	}
	o.dirty = false
	return o.writeCounts(ctx, w, page.counts)
}

func (o *listStreamer[T]) writeCounts(ctx context.Context, w *bufio.Writer, counts []views.Count) error {
	var buf bytes.Buffer
	if err := views.ListCounts(o.list.view(), counts).Render(ctx, &buf); err != nil {
		return err
	}
	if buf.String() == o.counts {
		return nil
	}
	o.counts = buf.String()
	return writeSSEData(w, "meta", buf.Bytes())
}

func (o *listStreamer[T]) event(ctx context.Context, w *bufio.Writer, e feed.Event) error {
	it, ok, err := o.list.item(ctx, e)
	if err != nil || !ok {
		return err
	}
	id, orgID, createdBy := o.list.key(it)
	if !o.v.Sees(orgID, createdBy) {
		return nil
	}
	o.dirty, o.changedAt = true, time.Now()
	match := o.list.matches(it)
	if o.visible[id] {
		return writeSSE(ctx, w, "row", o.list.row(ctx, it, !match))
	}
	lv := o.list.view()
	if !match || lv.Paged {
		return nil
	}
	if len(o.visible) >= cmp.Or(o.rowCap, dashLiveRowCap) {
		o.newer++
		return writeSSE(ctx, w, "meta", views.NewerNotice(lv.NewerID(), o.newer, lv.NewestPath))
	}
	if len(o.visible) == 0 {
		if err := writeSSE(ctx, w, "row", views.RowDelete(lv.EmptyID())); err != nil {
			return err
		}
	}
	o.visible[id] = true
	return writeSSE(ctx, w, "row", o.list.prepend(ctx, it))
}

func (o *listStreamer[T]) tick(ctx context.Context, w *bufio.Writer) error {
	if !o.dirty {
		return nil
	}
	o.dirty = false
	counts, err := o.list.counts(ctx, o.changedAt)
	if err != nil {
		o.s.log.Warn("dashboard counts", "err", err)
		return nil
	}
	return o.writeCounts(ctx, w, counts)
}
