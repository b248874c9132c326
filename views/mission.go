package views

import (
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MissionMaxDepth is the deepest indentation a drop gets in its thread; deeper continuations
// line up at this depth.
const MissionMaxDepth = 6

// The priorities the compose bar offers (one in each band of job priorities).
const (
	PriorityUrgent  = 5
	PriorityNormal  = 30
	PriorityDefault = 50
	PriorityBulk    = 80
)

// MissionDrop is one prompt of the mission field with the state of its current job.
type MissionDrop struct {
	PromptID string
	// ParentID is the entity the prompt continues (a prompt or a response), "" for a new thread.
	ParentID  string
	Text      string
	CreatedAt time.Time
	// JobID, State, Priority, Attempt, MaxAttempts, ErrorKind, ErrorMessage and UpdatedAt are
	// those of the prompt's newest job: the drop follows a retry's new job.
	JobID        string
	State        string
	Priority     int
	Attempt      int
	MaxAttempts  int
	ErrorKind    string
	ErrorMessage string
	UpdatedAt    time.Time
	Response     *MissionResponse
	// Output is what the job has written so far (a running job), or what it had written when it
	// was cancelled or failed; HasOutput says the drop shows it (always while running, so that
	// live text has its place).
	Output    string
	HasOutput bool
	// Superseded are the earlier jobs of the prompt that a retry replaced, oldest first.
	Superseded []MissionAttempt
	// Depth is how deep the drop sits in its thread, or -1 when the renderer does not know it
	// (a live fragment: the page keeps the depth the drop already has).
	Depth int
	// Markup, when not empty, is the drop as MissionDropView rendered it before (at Depth, not
	// out of band, with the page's CSRF token): the field writes it as it is.
	Markup string
	// ScheduledFor is the time a queued, scheduled prompt waits for; nil for any other drop.
	ScheduledFor *time.Time
	// StartsIn is the server's estimate, in seconds, of when a queued drop starts; nil when
	// there is none (the drop is not queued).
	StartsIn *int
}

// MissionResponse is the answer of a settled drop.
type MissionResponse struct {
	ID        string
	Text      string
	CreatedAt time.Time
}

// MissionAttempt is an earlier, superseded job of a drop.
type MissionAttempt struct {
	JobID     string
	Attempt   int
	ErrorKind string
	UpdatedAt time.Time
}

// MissionThread is a root prompt and its continuations, in prompt created_at order.
type MissionThread struct {
	RootID    string
	CreatedAt time.Time
	Drops     []MissionDrop
}

// MissionField is what the field shows: the threads in the created_at order of their roots,
// and the as_of of the read it came from (the next mission/recent since).
type MissionField struct {
	Threads []MissionThread
	AsOf    time.Time
}

// Drops returns every drop of the field, newest first (the order of the "continue from" list).
func (f MissionField) Drops() []MissionDrop {
	// Sorted by pointer: a drop is a large struct, and moving 200 of them about is most of
	// the sort's cost.
	var all []*MissionDrop
	for i := range f.Threads {
		for j := range f.Threads[i].Drops {
			all = append(all, &f.Threads[i].Drops[j])
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	out := make([]MissionDrop, len(all))
	for i, d := range all {
		out[i] = *d
	}
	return out
}

// BuildMissionField groups drops into threads by continuation: a drop whose parent (a prompt,
// or the response of a prompt) is among drops joins its parent's thread one level deeper;
// any other drop starts a thread. Threads are ordered by their root's created_at and drops
// inside a thread by their own created_at: never by completion order.
func BuildMissionField(drops []MissionDrop, asOf time.Time) MissionField {
	// Sorted by pointer: a drop is a large struct, and moving them about is most of the cost.
	sorted := make([]*MissionDrop, len(drops))
	for i := range drops {
		sorted[i] = &drops[i]
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		if !sorted[i].CreatedAt.Equal(sorted[j].CreatedAt) {
			return sorted[i].CreatedAt.Before(sorted[j].CreatedAt)
		}
		return sorted[i].PromptID < sorted[j].PromptID
	})
	// owner maps a prompt id and its response id to the prompt.
	owner := make(map[string]string, 2*len(sorted))
	for _, d := range sorted {
		owner[d.PromptID] = d.PromptID
		if d.Response != nil && d.Response.ID != "" {
			owner[d.Response.ID] = d.PromptID
		}
	}
	root := make(map[string]string, len(sorted))
	depth := make(map[string]int, len(sorted))
	index := map[string]int{}
	f := MissionField{AsOf: asOf}
	for _, src := range sorted {
		d := *src
		r, dp := d.PromptID, 0
		// A parent created later than its child cannot happen; the check only guards the
		// walk against bad data.
		if p, ok := owner[d.ParentID]; ok && p != d.PromptID {
			if pr, seen := root[p]; seen {
				r, dp = pr, min(depth[p]+1, MissionMaxDepth)
			}
		}
		root[d.PromptID], depth[d.PromptID] = r, dp
		d.Depth = dp
		i, ok := index[r]
		if !ok {
			i = len(f.Threads)
			index[r] = i
			f.Threads = append(f.Threads, MissionThread{RootID: r, CreatedAt: d.CreatedAt})
		}
		f.Threads[i].Drops = append(f.Threads[i].Drops, d)
	}
	return f
}

// dropClass is the state class of a drop: queued breathes, running
// is pending, succeeded is the settled drop with no class, failed is an orphan.
func dropClass(state string) string {
	switch state {
	case "queued":
		return "is-queued"
	case "running":
		return "is-pending"
	case "failed":
		return "is-orphan"
	case "cancelled":
		return "is-cancelled"
	case "superseded":
		return "is-superseded"
	}
	return ""
}

// dropClasses is the class attribute of a drop: "drop" and its state class, if any.
func dropClasses(state string) string {
	if c := dropClass(state); c != "" {
		return "drop " + c
	}
	return "drop"
}

// dropStateLabel is the words a drop's state reads as.
func dropStateLabel(state string) string {
	switch state {
	case "queued":
		return "Queued"
	case "running":
		return "Running"
	case "succeeded":
		return "Settled"
	case "failed":
		return "Failed"
	case "cancelled":
		return "Cancelled"
	case "superseded":
		return "Superseded"
	}
	return "Unknown"
}

// startsIn says when a queued drop should start, in round words.
func startsIn(secs int) string {
	switch {
	case secs <= 1:
		return "starting now"
	case secs < 60:
		return "starts in about " + strconv.Itoa(secs) + " s"
	case secs < 3600:
		return "starts in about " + strconv.Itoa((secs+30)/60) + " min"
	}
	return "starts in about " + strconv.Itoa((secs+1800)/3600) + " h"
}

// clock is a time of day as the drop shows it before the page's script puts it in the
// reader's own time zone.
func clock(t time.Time) string { return t.UTC().Format("15:04") + " UTC" }

// OutputID is the id of a drop's output element: live output is appended to it by id.
func OutputID(jobID string) string { return "out-" + jobID }

// inFlight reports whether a drop's job may still change on its own.
func inFlight(state string) bool { return state == "queued" || state == "running" }

// canRetry reports whether the drop offers the retry chip: only an orphan (failed) does;
// a cancelled drop is greyed with no chip.
func canRetry(state string) bool { return state == "failed" }

// priorityLabel names a priority by its band.
func priorityLabel(p int) string {
	switch {
	case p <= 10:
		return "urgent"
	case p <= 40:
		return "normal"
	case p < 60:
		return "default"
	}
	return "bulk"
}

// micros renders t as Unix microseconds: the sortable created_at and version attributes.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// dropVersion orders renderings of one drop: the newest job's last change. A page never
// replaces a drop by a rendering with a smaller version (a late answer to an earlier request).
func dropVersion(d MissionDrop) string {
	v := d.UpdatedAt
	if v.Before(d.CreatedAt) {
		v = d.CreatedAt
	}
	return micros(v)
}

// rfc3339 is the wire form of times.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// excerpt shortens text to n runes on one line.
func excerpt(text string, n int) string {
	if s, ok := plainExcerpt(text, n); ok {
		return s
	}
	return excerptRunes(text, n)
}

// plainExcerpt is excerpt for the common text whose whitespace, past a leading run of spaces,
// is single spaces between words: its excerpt is a piece of text itself, with no copy. ok is
// false for any other text (other whitespace, a run of spaces, invalid UTF-8).
func plainExcerpt(text string, n int) (string, bool) {
	lo := 0
	for lo < len(text) && text[lo] == ' ' {
		lo++
	}
	// count is the runes of the excerpt so far, which is text[lo:end]; mark is where it
	// held n-1 of them.
	count, end, mark := 0, lo, lo
	space := false
	for i, r := range text[lo:] {
		pos := lo + i
		switch {
		case r == ' ':
			if space {
				return "", false
			}
			space = true
			continue
		case r == utf8.RuneError || unicode.IsSpace(r):
			return "", false
		}
		if space {
			space = false
			if count++; count == n-1 {
				mark = pos
			}
		}
		end = pos + utf8.RuneLen(r)
		if count++; count == n-1 {
			mark = end
		}
		if count > n {
			return strings.TrimSpace(text[lo:mark]) + "…", true
		}
	}
	return text[lo:end], true
}

// excerptRunes is excerpt for any text.
func excerptRunes(text string, n int) string {
	// The text with its whitespace runs collapsed to single spaces and trimmed, read only as
	// far as its first n+1 runes: a drop's text may be long, and the field shows many.
	out := make([]rune, 0, n+1)
	space := false
	for _, r := range text {
		if unicode.IsSpace(r) {
			space = len(out) > 0
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
		if len(out) > n {
			return strings.TrimSpace(string(out[:n-1])) + "…"
		}
	}
	return string(out)
}

// depthAttr is the data-depth of a drop (CSS indents by it), capped at MissionMaxDepth.
func depthAttr(depth int) string { return strconv.Itoa(min(max(depth, 0), MissionMaxDepth)) }
