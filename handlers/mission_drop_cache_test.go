package handlers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs/readmodel"
	"asterion/views"
)

// cacheEntry is a settled drop of a fresh job with markup of n bytes at depth 0.
func cacheEntry(n int) *missionDropEntry {
	v := readmodel.MissionVersion{PromptID: uuid.New(), JobID: uuid.New(), State: "succeeded",
		UpdatedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	return &missionDropEntry{version: v, drop: views.MissionDrop{PromptID: v.PromptID.String(), JobID: v.JobID.String(),
		State: v.State, Depth: -1}, markup: strings.Repeat("x", n)}
}

// A lookup hits only at the version stored; another version of the job misses and drops the
// stale entry.
func TestMissionDropCacheHitsOnlyTheStoredVersion(t *testing.T) {
	t.Parallel()
	c := newMissionDropCache(1 << 20)
	e := cacheEntry(100)
	if _, ok := c.lookup(e.version); ok {
		t.Fatal("an empty cache hit")
	}
	c.store(e)
	got, ok := c.lookup(e.version)
	if !ok || got.markup != e.markup {
		t.Fatalf("lookup at the stored version: %v, %v", got, ok)
	}
	// The same instant in another location is the same version.
	same := e.version
	same.UpdatedAt = same.UpdatedAt.In(time.FixedZone("x", 3600))
	if _, ok := c.lookup(same); !ok {
		t.Error("the same instant in another zone missed")
	}
	for name, change := range map[string]func(*readmodel.MissionVersion){
		"updated_at": func(v *readmodel.MissionVersion) { v.UpdatedAt = v.UpdatedAt.Add(time.Microsecond) },
		"state":      func(v *readmodel.MissionVersion) { v.State = "superseded" },
		"prompt":     func(v *readmodel.MissionVersion) { v.PromptID = uuid.New() },
	} {
		c.store(e)
		v := e.version
		change(&v)
		if _, ok := c.lookup(v); ok {
			t.Errorf("a lookup with another %s hit", name)
		}
		if n, bytes := c.stats(); n != 0 || bytes != 0 {
			t.Errorf("after a stale lookup (%s) the cache holds %d entries, %d bytes; want the stale one dropped", name, n, bytes)
		}
	}
}

// The cache holds at most its bound of bytes, evicting the least recently used entries first;
// an entry over the bound is not kept; storing a job again replaces its entry.
func TestMissionDropCacheEvictsLeastRecentlyUsedWithinItsBound(t *testing.T) {
	t.Parallel()
	one := cacheEntry(1000)
	c := newMissionDropCache(1)
	c.store(one)
	if n, _ := c.stats(); n != 0 {
		t.Fatalf("an entry over the bound was kept")
	}
	size := one.size
	c = newMissionDropCache(3 * size)
	a, b, d := cacheEntry(1000), cacheEntry(1000), cacheEntry(1000)
	c.store(a)
	c.store(b)
	c.store(d)
	if n, bytes := c.stats(); n != 3 || bytes != 3*size {
		t.Fatalf("three entries: %d, %d bytes, want 3, %d", n, bytes, 3*size)
	}
	if _, ok := c.lookup(a.version); !ok { // a is now the most recently used, b the least
		t.Fatal("a missed")
	}
	e := cacheEntry(1000)
	c.store(e)
	if _, ok := c.lookup(b.version); ok {
		t.Error("b, the least recently used, was not evicted")
	}
	for name, x := range map[string]*missionDropEntry{"a": a, "d": d, "e": e} {
		if _, ok := c.lookup(x.version); !ok {
			t.Errorf("%s was evicted", name)
		}
	}
	if n, bytes := c.stats(); n != 3 || bytes > 3*size {
		t.Errorf("the cache holds %d entries, %d bytes, over its bound %d", n, bytes, 3*size)
	}
	again := *a
	again.markup = strings.Repeat("y", 10)
	c.store(&again)
	if got, ok := c.lookup(a.version); !ok || got.markup != again.markup {
		t.Errorf("storing a job again did not replace its entry: %v", ok)
	}
	if n, _ := c.stats(); n != 3 {
		t.Errorf("storing a job again left %d entries, want 3", n)
	}
}

// Markup serves only the depth it was rendered at, and a token it holds only that token.
func TestMissionDropEntryMarkupForDepthAndToken(t *testing.T) {
	t.Parallel()
	e := cacheEntry(10)
	if _, ok := e.markupFor(0, "tok-a"); !ok {
		t.Error("unbound markup at its depth missed")
	}
	if _, ok := e.markupFor(1, "tok-a"); ok {
		t.Error("markup served another depth")
	}
	e.csrfBound, e.csrf = true, "tok-a"
	if _, ok := e.markupFor(0, "tok-a"); !ok {
		t.Error("bound markup missed its own token")
	}
	if _, ok := e.markupFor(0, "tok-b"); ok {
		t.Error("markup holding one session's token served another")
	}
	e.markup = ""
	if _, ok := e.markupFor(0, "tok-a"); ok {
		t.Error("an entry without markup served some")
	}
}

// Only a drop whose job is terminal, and became so before the read's as_of, may be cached.
func TestMissionDropSettledBefore(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		state string
		at    time.Time
		want  bool
	}{
		{"succeeded", asOf.Add(-time.Microsecond), true},
		{"failed", asOf.Add(-time.Second), true},
		{"cancelled", asOf.Add(-time.Second), true},
		{"succeeded", asOf, false},
		{"cancelled", asOf.Add(time.Second), false},
		{"queued", asOf.Add(-time.Second), false},
		{"running", asOf.Add(-time.Second), false},
	} {
		it := readmodel.MissionItem{}
		it.Job.State, it.Job.UpdatedAt = c.state, c.at
		if got := settledBefore(it, asOf); got != c.want {
			t.Errorf("%s at as_of%+v: cacheable %v, want %v", c.state, c.at.Sub(asOf), got, c.want)
		}
	}
}
