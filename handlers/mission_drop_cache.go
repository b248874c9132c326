package handlers

import (
	"container/list"
	"sync"

	"github.com/google/uuid"

	"asterion/jobs/readmodel"
	"asterion/views"
)

// missionDropCacheBytes bounds the memory the rendered-drop cache holds: its markup and texts.
// A drop is a few KiB, so this keeps several thousand, the settled fields of many users.
const missionDropCacheBytes = 32 << 20

// missionDropOverhead is what one cached drop costs beyond its strings (the entry, its list
// element and map slot, the drop's and item's fixed fields), counted against the bound.
const missionDropOverhead = 768

// missionDropEntry is one settled drop as a field read and rendered it. It never changes once
// stored (a new rendering replaces it), so a reader may keep it after the lock is released.
type missionDropEntry struct {
	// version is what the drop was read at: a lookup hits only for exactly this version.
	version readmodel.MissionVersion
	// item is the drop's item, cut down to what a mission stream keeps of a rendering (the
	// prompt, the job's id, attempt and state).
	item readmodel.MissionItem
	// drop is the drop's data, with no depth and no markup.
	drop views.MissionDrop
	// markup is the drop rendered at depth. When csrfBound is set it holds the CSRF token csrf
	// (a failed drop's retry form) and serves only that token; otherwise any.
	markup    string
	depth     int
	csrf      string
	csrfBound bool
	size      int
}

// markupFor returns the entry's markup if it is the rendering of the drop at depth for a page
// whose CSRF token is csrf.
func (e *missionDropEntry) markupFor(depth int, csrf string) (string, bool) {
	if e.markup == "" || e.depth != depth || (e.csrfBound && e.csrf != csrf) {
		return "", false
	}
	return e.markup, true
}

// missionDropCache keeps the data and rendered markup of settled drops of the mission field,
// by job id, in least-recently-used order within a bound on bytes. Only a drop whose newest
// job is terminal goes in: such a drop changes only with a new version (a write to its job, or
// a retry's new job, see readmodel.MissionVersion), and a lookup names the version the field's read
// found, so a changed drop is never served from the cache. Entries are per job, and a job is
// one user's: a page looks up only the jobs its own viewer's read returned, so a drop cached
// for one user is never shown to another.
type missionDropCache struct {
	mu    sync.Mutex
	max   int
	bytes int
	lru   *list.List // of *missionDropEntry, most recently used at the front
	byJob map[uuid.UUID]*list.Element
}

// newMissionDropCache returns an empty cache holding at most maxBytes.
func newMissionDropCache(maxBytes int) *missionDropCache {
	return &missionDropCache{max: maxBytes, lru: list.New(), byJob: map[uuid.UUID]*list.Element{}}
}

// lookup returns the entry of v's job if it was stored at exactly version v. An entry of
// another version is stale and is dropped.
func (c *missionDropCache) lookup(v readmodel.MissionVersion) (*missionDropEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byJob[v.JobID]
	if !ok {
		return nil, false
	}
	e := el.Value.(*missionDropEntry)
	if !sameVersion(e.version, v) {
		c.removeLocked(el)
		return nil, false
	}
	c.lru.MoveToFront(el)
	return e, true
}

// store puts e in the cache in place of any entry of its job, then evicts the least recently
// used entries until the cache is within its bound. An entry larger than the bound is not kept.
func (c *missionDropCache) store(e *missionDropEntry) {
	e.size = missionDropOverhead + len(e.markup) + len(e.csrf) + len(e.drop.Text) + len(e.drop.Output) +
		len(e.drop.ErrorKind) + len(e.drop.ErrorMessage)
	if e.drop.Response != nil {
		e.size += len(e.drop.Response.Text)
	}
	for _, a := range e.drop.Superseded {
		e.size += 128 + len(a.ErrorKind)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byJob[e.version.JobID]; ok {
		c.removeLocked(el)
	}
	if e.size > c.max {
		return
	}
	c.byJob[e.version.JobID] = c.lru.PushFront(e)
	c.bytes += e.size
	for c.bytes > c.max {
		c.removeLocked(c.lru.Back())
	}
}

// removeLocked drops el; c.mu is held.
func (c *missionDropCache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*missionDropEntry)
	delete(c.byJob, e.version.JobID)
	c.bytes -= e.size
}

// stats returns how many entries and bytes the cache holds.
func (c *missionDropCache) stats() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

// sameVersion reports whether a and b name the same state of a drop.
func sameVersion(a, b readmodel.MissionVersion) bool {
	return a.JobID == b.JobID && a.PromptID == b.PromptID && a.State == b.State && a.UpdatedAt.Equal(b.UpdatedAt)
}

// versionOf is the version an item was read at.
func versionOf(it readmodel.MissionItem) readmodel.MissionVersion {
	return readmodel.MissionVersion{PromptID: it.Prompt.ID, JobID: it.Job.ID, State: it.Job.State, UpdatedAt: it.Job.UpdatedAt}
}
