package handlers

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
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

// eventStatus is the part of an event's payload a row shows as of that event: rendering the
// state each event reports (rather than the row's state when it is read) shows every step in
// order, and the last event of a burst leaves the row as it now is.
type eventStatus struct {
	// Job events (jobs.JobEvent).
	State           string     `json:"state"`
	Attempt         *int       `json:"attempt"`
	ErrorKind       *string    `json:"error_kind"`
	Priority        *int       `json:"priority"`
	OperationStatus string     `json:"operation_status"`
	UpdatedAt       *time.Time `json:"updated_at"`
	// Operation events.
	Status string `json:"status"`
}

func parseEventStatus(e feed.Event) eventStatus {
	var st eventStatus
	_ = json.Unmarshal(e.Payload, &st)
	return st
}

// eventOperation loads the operation an event is about, once per event for every stream of
// this server.
func (s *Server) eventOperation(ctx context.Context, e feed.Event) (db.Operation, bool, error) {
	if e.OperationID == nil {
		return db.Operation{}, false, nil
	}
	id := *e.OperationID
	val, err := s.dash().cache.get(ctx, fmt.Sprintf("op:%d:%s", e.Seq, id), 10*time.Second, func(ctx context.Context) (any, error) {
		return s.deps.Jobs.OperationRows(ctx, dashAllOrgs, []uuid.UUID{id})
	})
	if err != nil {
		return db.Operation{}, false, err
	}
	op, ok := val.(map[uuid.UUID]db.Operation)[id]
	if !ok {
		return db.Operation{}, false, nil
	}
	st := parseEventStatus(e)
	switch {
	case e.Topic == feed.TopicJob && st.OperationStatus != "":
		op.Status = st.OperationStatus
	case e.Topic == feed.TopicOperation && st.Status != "":
		op.Status = st.Status
	}
	if st.UpdatedAt != nil && !st.UpdatedAt.IsZero() {
		op.UpdatedAt = *st.UpdatedAt
	}
	return op, true, nil
}

// eventJob loads the job an event is about, once per event for every stream of this server.
func (s *Server) eventJob(ctx context.Context, e feed.Event) (db.Job, bool, error) {
	if e.JobID == nil || e.Topic != feed.TopicJob {
		return db.Job{}, false, nil
	}
	id := *e.JobID
	val, err := s.dash().cache.get(ctx, fmt.Sprintf("job:%d:%s", e.Seq, id), 10*time.Second, func(ctx context.Context) (any, error) {
		return s.deps.Jobs.JobRows(ctx, dashAllOrgs, []uuid.UUID{id})
	})
	if err != nil {
		return db.Job{}, false, err
	}
	j, ok := val.(map[uuid.UUID]db.Job)[id]
	if !ok {
		return db.Job{}, false, nil
	}
	st := parseEventStatus(e)
	if st.State != "" {
		j.State = st.State
	}
	if st.Attempt != nil {
		j.Attempt = *st.Attempt
	}
	if st.Priority != nil {
		j.Priority = *st.Priority
	}
	if st.UpdatedAt != nil && !st.UpdatedAt.IsZero() {
		j.UpdatedAt = *st.UpdatedAt
	}
	j.ErrorKind = st.ErrorKind
	return j, true, nil
}

// sees reports whether the dashboard viewer v may see an object of org (operators see their
// org, admins every org; the hub's scope already filters, this is the second check).
func sees(v jobs.Viewer, orgID int64) bool { return v.AllOrgs || orgID == v.OrgID }

// opsStreamer keeps an operations list live.
type opsStreamer struct {
	s       *Server
	p       identity.Principal
	v       jobs.Viewer
	q       opsQuery
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

func (o *opsStreamer) tickEvery() time.Duration { return time.Second }

func (o *opsStreamer) snapshot(ctx context.Context, w *bufio.Writer) error {
	d, ops, err := o.s.loadOpsList(ctx, o.p, o.q)
	if err != nil {
		return err
	}
	o.visible, o.newer = make(map[uuid.UUID]bool, len(ops)), 0
	for _, op := range ops {
		o.visible[op.ID] = true
	}
	if err := writeSSE(ctx, w, "snapshot", views.OpsListFragment(d, true)); err != nil {
		return err
	}
	o.dirty = false
	return o.writeCounts(ctx, w, d.Counts)
}

func (o *opsStreamer) writeCounts(ctx context.Context, w *bufio.Writer, counts []views.Count) error {
	var buf bytes.Buffer
	if err := views.OpsCounts(counts).Render(ctx, &buf); err != nil {
		return err
	}
	if buf.String() == o.counts {
		return nil
	}
	o.counts = buf.String()
	return writeSSEData(w, "meta", buf.Bytes())
}

func (o *opsStreamer) event(ctx context.Context, w *bufio.Writer, e feed.Event) error {
	op, ok, err := o.s.eventOperation(ctx, e)
	if err != nil || !ok || !sees(o.v, op.OrgID) {
		return err
	}
	o.dirty, o.changedAt = true, time.Now()
	match := o.q.matches(op)
	if o.visible[op.ID] {
		orgs, _ := o.s.names(ctx, []int64{op.OrgID}, nil)
		row := opRowOf(op, orgs)
		row.Stale = !match
		return writeSSE(ctx, w, "row", views.OpRowTR(row, o.p.SeesAllOrgs(), true))
	}
	if !match || o.q.filter.Cursor != "" {
		return nil
	}
	if len(o.visible) >= cmp.Or(o.rowCap, dashLiveRowCap) {
		o.newer++
		return writeSSE(ctx, w, "meta", views.NewerNotice("ops-newer", o.newer, views.OpsPath(o.q.view, "")))
	}
	if len(o.visible) == 0 {
		if err := writeSSE(ctx, w, "row", views.RowDelete("ops-empty")); err != nil {
			return err
		}
	}
	o.visible[op.ID] = true
	orgs, _ := o.s.names(ctx, []int64{op.OrgID}, nil)
	return writeSSE(ctx, w, "row", views.OpRowPrepend(opRowOf(op, orgs), o.p.SeesAllOrgs()))
}

func (o *opsStreamer) tick(ctx context.Context, w *bufio.Writer) error {
	if !o.dirty {
		return nil
	}
	o.dirty = false
	counts, err := o.s.opsCounts(ctx, o.v, o.q, o.changedAt)
	if err != nil {
		o.s.log.Warn("dashboard counts", "err", err)
		return nil
	}
	return o.writeCounts(ctx, w, counts)
}

// operationsEvents is GET /admin/deferred-operations/events?<filter>: the list's stream.
func (s *Server) operationsEvents(c *fiber.Ctx) error {
	p := principalOf(c)
	q := s.parseOpsQuery(c.UserContext(), p, func(k string) string { return c.Query(k) }, time.Now())
	v := viewerOf(p)
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob, feed.TopicOperation}
	s.pageStream(c, scope, &opsStreamer{s: s, p: p, v: v, q: q})
	return nil
}

// jobsStreamer keeps a jobs list live.
type jobsStreamer struct {
	s       *Server
	p       identity.Principal
	v       jobs.Viewer
	q       jobsQuery
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

func (o *jobsStreamer) tickEvery() time.Duration { return time.Second }

func (o *jobsStreamer) snapshot(ctx context.Context, w *bufio.Writer) error {
	d, list, err := o.s.loadJobsList(ctx, o.p, o.q)
	if err != nil {
		return err
	}
	o.visible, o.newer = make(map[uuid.UUID]bool, len(list)), 0
	for _, j := range list {
		o.visible[j.ID] = true
	}
	if err := writeSSE(ctx, w, "snapshot", views.JobsListFragment(d, true)); err != nil {
		return err
	}
	o.dirty = false
	return o.writeCounts(ctx, w, d.Counts)
}

func (o *jobsStreamer) writeCounts(ctx context.Context, w *bufio.Writer, counts []views.Count) error {
	var buf bytes.Buffer
	if err := views.JobsCounts(counts).Render(ctx, &buf); err != nil {
		return err
	}
	if buf.String() == o.counts {
		return nil
	}
	o.counts = buf.String()
	return writeSSEData(w, "meta", buf.Bytes())
}

func (o *jobsStreamer) event(ctx context.Context, w *bufio.Writer, e feed.Event) error {
	j, ok, err := o.s.eventJob(ctx, e)
	if err != nil || !ok || !sees(o.v, j.OrgID) {
		return err
	}
	o.dirty, o.changedAt = true, time.Now()
	match := o.q.matches(j)
	if o.visible[j.ID] {
		row := o.s.jobRows(ctx, []db.Job{j})[0]
		row.Stale = !match
		return writeSSE(ctx, w, "row", views.JobRowTR(row, o.p.SeesAllOrgs(), true))
	}
	if !match || o.q.filter.Cursor != "" {
		return nil
	}
	if len(o.visible) >= cmp.Or(o.rowCap, dashLiveRowCap) {
		o.newer++
		return writeSSE(ctx, w, "meta", views.NewerNotice("jobs-newer", o.newer, views.JobsPath(o.q.view, "")))
	}
	if len(o.visible) == 0 {
		if err := writeSSE(ctx, w, "row", views.RowDelete("jobs-empty")); err != nil {
			return err
		}
	}
	o.visible[j.ID] = true
	return writeSSE(ctx, w, "row", views.JobRowPrepend(o.s.jobRows(ctx, []db.Job{j})[0], o.p.SeesAllOrgs()))
}

func (o *jobsStreamer) tick(ctx context.Context, w *bufio.Writer) error {
	if !o.dirty {
		return nil
	}
	o.dirty = false
	counts, err := o.s.jobsCounts(ctx, o.v, o.q, o.changedAt)
	if err != nil {
		o.s.log.Warn("dashboard counts", "err", err)
		return nil
	}
	return o.writeCounts(ctx, w, counts)
}

// jobsEvents is GET /admin/jobs/events?<filter>: the jobs list's stream.
func (s *Server) jobsEvents(c *fiber.Ctx) error {
	p := principalOf(c)
	q := s.parseJobsQuery(c.UserContext(), p, func(k string) string { return c.Query(k) }, time.Now())
	v := viewerOf(p)
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob}
	s.pageStream(c, scope, &jobsStreamer{s: s, p: p, v: v, q: q})
	return nil
}

// changedStreamer keeps a detail page live: "changed" on connect and, coalesced, whenever an
// event concerns the page's object.
type changedStreamer struct {
	concerns func(e feed.Event) bool
	dirty    bool
}

func (d *changedStreamer) tickEvery() time.Duration { return 150 * time.Millisecond }

func (d *changedStreamer) snapshot(_ context.Context, w *bufio.Writer) error {
	d.dirty = false
	return writeSSEData(w, "changed", []byte("snapshot"))
}

func (d *changedStreamer) event(_ context.Context, _ *bufio.Writer, e feed.Event) error {
	if d.concerns(e) {
		d.dirty = true
	}
	return nil
}

func (d *changedStreamer) tick(_ context.Context, w *bufio.Writer) error {
	if !d.dirty {
		return nil
	}
	d.dirty = false
	return writeSSEData(w, "changed", []byte("changed"))
}

// operationEvents is GET /admin/deferred-operations/:id/events.
func (s *Server) operationEvents(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	v := viewerOf(principalOf(c))
	d, err := s.deps.Jobs.GetOperation(c.UserContext(), v, id)
	if err != nil {
		return s.dashError(c, err, "operation")
	}
	var prompts []uuid.UUID
	for _, j := range d.Jobs {
		prompts = append(prompts, j.PromptID)
	}
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob, feed.TopicOperation}
	s.pageStream(c, scope, &changedStreamer{concerns: func(e feed.Event) bool {
		if e.OperationID != nil && *e.OperationID == id {
			return true
		}
		for _, p := range prompts {
			if e.PromptID != nil && *e.PromptID == p {
				return true
			}
		}
		return false
	}})
	return nil
}

// jobEvents is GET /admin/jobs/:id/events.
func (s *Server) jobEvents(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	v := viewerOf(principalOf(c))
	d, err := s.deps.Jobs.GetJob(c.UserContext(), v, id)
	if err != nil {
		return s.dashError(c, err, "job")
	}
	prompt := d.Job.PromptID
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob}
	s.pageStream(c, scope, &changedStreamer{concerns: func(e feed.Event) bool {
		return (e.JobID != nil && *e.JobID == id) || (e.PromptID != nil && *e.PromptID == prompt)
	}})
	return nil
}
