package views

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// The operator dashboard: /admin/deferred-operations, /admin/jobs and /admin/health. Handlers
// build these structs; the components in dashboard.templ, operations.templ, jobs.templ and
// health.templ render them. Nothing here carries a raw continuation or a payload: operations
// show digests, jobs show ids, states and error kinds.

// Dashboard tabs (the section navigation under the page header).
const (
	TabOperations = "operations"
	TabJobs       = "jobs"
	TabHealth     = "health"
)

// Live is what a live list or detail needs to stream: the SSE URL (one EventSource per page)
// and the URL the polling fallback refreshes from when the stream fails.
type Live struct {
	StreamURL string
	PollURL   string
}

// Notice is a one-line message shown above a page's content after an action.
type Notice struct {
	// Tone is "ok" or "error".
	Tone string
	Text string
}

// Option is one choice of a select field.
type Option struct {
	Value, Label string
}

// Hidden is a hidden form field.
type Hidden struct {
	Name, Value string
}

// Count is one figure of a counts bar, linking to the list filtered by it.
type Count struct {
	Key   string
	Label string
	N     int64
	Href  string
	// Current marks the count of the active filter.
	Current bool
}

// OpsFilter is the operations list filter as the form shows it (raw strings).
type OpsFilter struct {
	Status, Kind, Owner, Org, Range, From, To, Q string
}

// Values returns the filter as query parameters (empty ones left out).
func (f OpsFilter) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "kind": f.Kind, "owner": f.Owner, "org": f.Org,
		"range": f.Range, "from": f.From, "to": f.To, "q": f.Q} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Active reports whether any filter is set.
func (f OpsFilter) Active() bool { return len(f.Values()) > 0 }

// OpRow is one operation of the list.
type OpRow struct {
	ID            string
	Kind          string
	Owner         string
	Status        string
	Org           string
	CorrelationID string
	AcceptedAt    time.Time
	UpdatedAt     time.Time
	ExpiresAt     time.Time
	Terminal      bool
	ErrorKind     string
	// Stale marks a row that changed since it was listed and no longer matches the filter.
	Stale bool
}

// OpsList is the operations list: filter, counts, one page of rows and the next page's cursor.
type OpsList struct {
	Filter OpsFilter
	// Errors holds a message per filter field that was not understood (and so ignored).
	Errors     map[string]string
	Counts     []Count
	Rows       []OpRow
	NextCursor string
	// Paged is true when this is not the first page (new rows are not prepended then).
	Paged bool
	// ShowOrg adds the org column and filter (admins).
	ShowOrg bool
	Orgs    []Option
	Kinds   []Option
	Live    Live
	Notice  *Notice
}

// OpsPath is the operations list path with filter and cursor.
func OpsPath(f OpsFilter, cursor string) string {
	v := f.Values()
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return withQuery("/admin/deferred-operations", v)
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// HistoryItem is one entry of an operation's status history, digests only.
type HistoryItem struct {
	Seq         int64
	Status      string
	At          time.Time
	DocDigest   string
	PrevDigest  string
	EntryDigest string
	// Broken marks the first entry where the chain does not verify.
	Broken bool
}

// JobRow is one job of a list: the jobs list and an operation's linked prompt jobs.
type JobRow struct {
	ID          string
	PromptID    string
	OperationID string
	State       string
	Priority    int
	Attempt     int
	MaxAttempts int
	Org         string
	Creator     string
	ErrorKind   string
	Supersedes  string
	CreatedAt   time.Time
	ScheduledAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	UpdatedAt   time.Time
	// ScheduledFor is the time a scheduled prompt asked to run at (nil for any other job).
	ScheduledFor *time.Time
	// Stale marks a row that changed since it was listed and no longer matches the filter.
	Stale bool
	// Current marks the job a detail page is about, in a supersede chain.
	Current bool
	// Cancelable and Retryable say whether the job's state allows a cancel or a retry.
	Cancelable, Retryable bool
	// Door is the front door the job came through ("front_door", "batch"), "" for any other.
	Door string
}

// OperationDetail is the operator view of one operation: every registry field except the
// continuation and payloads, which are shown only as digests.
type OperationDetail struct {
	ID                string
	Kind              string
	Owner             string
	Status            string
	Terminal          bool
	Org               string
	Creator           string
	CorrelationID     string
	SubjectPromptID   string
	SubjectJobID      string
	AcceptedAt        time.Time
	UpdatedAt         time.Time
	ExpiresAt         time.Time
	TerminalAt        *time.Time
	NextPollAt        *time.Time
	RetryAfterSeconds int
	PollCount         int
	// CancelReason is why the operation cannot be cancelled ("" when it can, or is terminal).
	CancelReason       string
	ContinuationDigest string
	DiagnosticsDigest  string
	ErrorKind          string
	ErrorMessage       string
	// SuccessorID is the operation that superseded this one (a retry), PredecessorID the one
	// this one superseded ("" when none).
	SuccessorID   string
	PredecessorID string
	History       []HistoryItem
	ChainVerified bool
	ChainError    string
	Jobs          []JobRow
	// RetryJobID is the job a retry would supersede ("" when no linked job may be retried).
	RetryJobID string
	// Output is what the operation's own prompt job has written so far (not Shown for other
	// kinds).
	Output JobOutput
	Live   Live
	Notice *Notice

	// Batch is the progress of a batch of the front door (nil for another kind).
	Batch *BatchProgress
}

// Cancelable reports whether the cancel button is enabled.
func (d OperationDetail) Cancelable() bool { return !d.Terminal && d.CancelReason == "" }

// CancelUnavailable is the reason shown beside a disabled cancel button.
func (d OperationDetail) CancelUnavailable() string {
	if d.Terminal {
		return "The operation has already finished (" + statusLabel(d.Status) + ")."
	}
	return d.CancelReason
}

// JobsFilter is the jobs list filter as the form shows it.
type JobsFilter struct {
	State, Org, Range, Q string
}

// Values returns the filter as query parameters (empty ones left out).
func (f JobsFilter) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"state": f.State, "org": f.Org, "range": f.Range, "q": f.Q} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// JobsPath is the jobs list path with filter and cursor.
func JobsPath(f JobsFilter, cursor string) string {
	v := f.Values()
	v.Del("q")
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return withQuery("/admin/jobs", v)
}

// JobsList is the jobs list page.
type JobsList struct {
	Filter     JobsFilter
	Errors     map[string]string
	Counts     []Count
	Rows       []JobRow
	NextCursor string
	Paged      bool
	ShowOrg    bool
	Orgs       []Option
	Live       Live
	Notice     *Notice
	// BulkCap is the most jobs one bulk action touches.
	BulkCap int
}

// JobDetail is one job with its prompt's supersede chain.
type JobDetail struct {
	Job          JobRow
	ErrorMessage string
	WorkerClaim  string
	ResponseID   string
	HeartbeatAt  *time.Time
	ClaimedAt    *time.Time
	Chain        []JobRow
	Live         Live
	Notice       *Notice
	// Output is what the job's current attempt has written so far.
	Output JobOutput
}

// BulkConfirm is the confirmation page of a bulk cancel or retry.
type BulkConfirm struct {
	// Action is "cancel" or "retry".
	Action string
	Filter JobsFilter
	// Count is how many jobs the action will touch now (at most Cap).
	Count int
	// More is true when more than Cap jobs match: only the newest Cap are touched.
	More bool
	Cap  int
}

// Verb is the action's verb for buttons and headings.
func (b BulkConfirm) Verb() string {
	if b.Action == "retry" {
		return "Retry"
	}
	return "Cancel"
}

// Eligible names the states the action applies to.
func (b BulkConfirm) Eligible() string {
	if b.Action == "retry" {
		return "succeeded, failed or cancelled"
	}
	return "queued or running"
}

// Health is the queue-health page.
type Health struct {
	Window string
	// Counts are jobs by state (trigger-kept counters).
	Counts []Count
	Series []SeriesPoint
	// ErrorKinds are failed jobs by error kind over the window, most first.
	ErrorKinds []KindCount
	Finished   int64
	Failed     int64
	// Orgs are the per-org figures over the window (admins see every org).
	Orgs []OrgHealth
	// Queued and Due are queued jobs in total and due now; PastDue have waited past the grace.
	Queued       int64
	Due          int64
	PastDue      int64
	OldestDue    *time.Time
	PastDueGrace time.Duration
	// WorkerAlive, WorkerSeen and WorkerSource tell how worker liveness was judged.
	WorkerAlive  bool
	WorkerSeen   *time.Time
	WorkerSource string
	LeaderID     string
	Now          time.Time
	// Draining are the worker processes in a graceful stop.
	Draining []DrainingWorker
	// Flow is flow control: the models' governors, the orgs' shares and tokens per minute.
	Flow HealthFlow
	// Doors are the jobs of the OpenAI-compatible front door by the door they came through.
	Doors []DoorCount
}

// DrainingWorker is a worker process in a graceful stop; ID is "" for a viewer who may not
// see it.
type DrainingWorker struct {
	ID               string
	Since, GraceEnds time.Time
}

// NoWorkerBanner reports whether to warn that work waits and no worker is alive.
func (h Health) NoWorkerBanner() bool { return h.Due > 0 && !h.WorkerAlive }

// ErrorRate is failed over finished in the window, as a percentage string.
func (h Health) ErrorRate() string { return percent(h.Failed, h.Finished) }

// SeriesPoint is one minute of the queue-health charts.
type SeriesPoint struct {
	At                               time.Time
	Finished, Failed                 int64
	WaitP50, WaitP95, RunP50, RunP95 float64
}

// KindCount is a number of failures of one error kind.
type KindCount struct {
	Kind string
	N    int64
}

// OrgHealth is one org's figures over the window.
type OrgHealth struct {
	Org                              string
	Finished, Failed                 int64
	WaitP50, WaitP95, RunP50, RunP95 float64
	ErrorKinds                       []KindCount
}

// ErrorRate is failed over finished as a percentage string.
func (o OrgHealth) ErrorRate() string { return percent(o.Failed, o.Finished) }

func percent(n, of int64) string {
	if of == 0 {
		return "—"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64) + " %"
}

// ShortID is the first 8 characters of an id, for tables; the full id is in the title and the
// copy button.
func ShortID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return id[:8]
}

// ShortDigest is the head and tail of a hex digest.
func ShortDigest(d string) string {
	if len(d) <= 16 {
		return d
	}
	return d[:8] + "…" + d[len(d)-8:]
}

// FormatDuration writes d for people: "850 ms", "12 s", "3 min 4 s", "2 h 5 min".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(math.Floor(d.Seconds()*10)/10, 'f', -1, 64) + " s"
	case d < time.Hour:
		m := int(d / time.Minute)
		s := int((d % time.Minute) / time.Second)
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	default:
		h := int(d / time.Hour)
		m := int((d % time.Hour) / time.Minute)
		if h >= 48 {
			return fmt.Sprintf("%d d %d h", h/24, h%24)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
}

// formatSeconds writes a number of seconds as a duration.
func formatSeconds(s float64) string {
	return FormatDuration(time.Duration(s * float64(time.Second)))
}

// JobTiming says how long a job has been waiting or running, or how long it ran: the label,
// the start of a still-growing interval (zero when the interval is closed) and the text at
// render time.
func JobTiming(j JobRow, now time.Time) (label string, since time.Time, text string) {
	switch j.State {
	case "queued":
		if j.ScheduledAt.After(now) {
			return "due in", time.Time{}, FormatDuration(j.ScheduledAt.Sub(now))
		}
		return "waiting", j.ScheduledAt, FormatDuration(now.Sub(j.ScheduledAt))
	case "running":
		start := j.UpdatedAt
		if j.StartedAt != nil {
			start = *j.StartedAt
		}
		return "running", start, FormatDuration(now.Sub(start))
	}
	if j.StartedAt != nil && j.FinishedAt != nil {
		return "ran", time.Time{}, FormatDuration(j.FinishedAt.Sub(*j.StartedAt))
	}
	if j.FinishedAt != nil {
		return "waited", time.Time{}, FormatDuration(j.FinishedAt.Sub(j.ScheduledAt))
	}
	return "", time.Time{}, "—"
}

// isoTime is the machine-readable form used in datetime and data attributes.
func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// opRowID and jobRowID are the element ids of table rows (OOB swap targets).
func opRowID(id string) string  { return "op-" + id }
func jobRowID(id string) string { return "job-" + id }

// dashTab is one tab of the dashboard section navigation.
type dashTab struct{ key, label, href string }

func dashTabs(admin bool) []dashTab {
	tabs := []dashTab{
		{TabOperations, "Operations", "/admin/deferred-operations"},
		{TabJobs, "Jobs", "/admin/jobs"},
		{TabHealth, "Queue health", "/admin/health"},
	}
	if admin {
		tabs = append(tabs, dashTab{"river", "River UI", "/admin/river/"})
	}
	return tabs
}

// rangeOptions are the time ranges of the list filters.
var rangeOptions = []Option{
	{"", "Any time"}, {"15m", "Last 15 minutes"}, {"1h", "Last hour"}, {"24h", "Last 24 hours"}, {"7d", "Last 7 days"},
}

// opStatusOptions are the deferred-operation statuses of the filter.
var opStatusOptions = []Option{
	{"", "Any status"}, {"pending", "pending"}, {"running", "running"}, {"completed", "completed"},
	{"failed", "failed"}, {"timed-out", "timed out"}, {"cancelled", "cancelled"}, {"expired", "expired"},
	{"unknown", "unknown"},
}

// JobsScheduled is the state filter's value for queued jobs still waiting for the time they
// were scheduled for.
const JobsScheduled = "scheduled"

// jobStateOptions are the job states of the filter, and the scheduled ones among the queued.
var jobStateOptions = []Option{
	{"", "Any state"}, {"queued", "queued"}, {JobsScheduled, "queued, scheduled ahead"}, {"running", "running"},
	{"succeeded", "succeeded"}, {"failed", "failed"}, {"cancelled", "cancelled"}, {"superseded", "superseded"},
}

func withAny(label string, opts []Option) []Option {
	return append([]Option{{"", label}}, opts...)
}

func isAdmin(p Page) bool { return p.User != nil && p.User.Role == RoleAdmin }

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}

func itoa(n int) string     { return strconv.Itoa(n) }
func i64toa(n int64) string { return strconv.FormatInt(n, 10) }

func lower(s string) string { return strings.ToLower(s) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func rangeLabel(r string) string {
	for _, o := range rangeOptions {
		if o.Value == r {
			return o.Label
		}
	}
	return r
}

func boolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// barWidth is the inline width of a proportion bar.
func barWidth(n, of int64) templ.SafeCSS {
	pct := 0.0
	if of > 0 {
		pct = math.Min(100, 100*float64(n)/float64(of))
	}
	return templ.SafeCSS("width: " + strconv.FormatFloat(pct, 'f', 1, 64) + "%")
}

// drainingTitle says which processes drain and when each one's grace ends.
func drainingTitle(ws []DrainingWorker) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		who := "a worker process"
		if w.ID != "" {
			who = w.ID
		}
		parts[i] = who + " draining since " + isoTime(w.Since) + ", grace ends " + isoTime(w.GraceEnds)
	}
	return strings.Join(parts, "; ")
}
