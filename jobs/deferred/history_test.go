package deferred

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

var t0 = time.Date(2026, 5, 18, 10, 0, 0, 0, time.UTC)

// buildChain records a realistic history: pending, running (twice, the
// second a re-poll), then completed.
func buildChain(t *testing.T) []HistoryEntry {
	t.Helper()
	id := uuid.MustParse("0b6f8e1c-6f3e-5a7d-9a51-2f4d1c7e8b90")
	exp := t0.Add(15 * time.Minute)
	cancel := Cancelable(CancelHref(id))
	docs := []StatusDoc{}
	for i, s := range []Status{StatusPending, StatusRunning, StatusRunning} {
		d, err := NewActiveStatus(id, "prompt.execute", s, t0.Add(time.Duration(i)*time.Second), exp, 2, cancel)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	done, err := NewCompletedStatus(id, "prompt.execute", t0.Add(5*time.Second), exp, json.RawMessage(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, done)
	var chain []HistoryEntry
	var prev *HistoryEntry
	for i, d := range docs {
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewHistoryEntry(prev, int64(i+1), d.Status, d.UpdatedAt.Add(123*time.Nanosecond), raw)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		chain = append(chain, e)
		prev = &chain[len(chain)-1]
	}
	return chain
}

func TestHistoryChainVerifies(t *testing.T) {
	chain := buildChain(t)
	if i, err := VerifyChain(chain); i != -1 || err != nil {
		t.Fatalf("VerifyChain = %d, %v", i, err)
	}
	if i, err := VerifyChain(nil); i != -1 || err != nil {
		t.Fatalf("VerifyChain(nil) = %d, %v", i, err)
	}
	if chain[0].PrevDigest != strings.Repeat("0", 64) {
		t.Errorf("first PrevDigest = %s", chain[0].PrevDigest)
	}
	for i, e := range chain {
		if !isDigest(e.DocDigest) || !isDigest(e.EntryDigest) || e.At.Nanosecond()%1000 != 0 || e.At.Location() != time.UTC {
			t.Errorf("entry %d is malformed: %+v", i, e)
		}
		if i > 0 && e.PrevDigest != chain[i-1].EntryDigest {
			t.Errorf("entry %d is not linked", i)
		}
	}
	// The stored form round-trips through JSON and still verifies.
	raw, err := json.Marshal(chain)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"at":"2026-05-18T10:00:00.000000Z"`) {
		t.Errorf("history JSON has unexpected times: %s", raw)
	}
	var back []HistoryEntry
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if i, err := VerifyChain(back); i != -1 || err != nil {
		t.Fatalf("VerifyChain(round trip) = %d, %v", i, err)
	}
}

func TestHistoryDocDigestIsCanonical(t *testing.T) {
	a, err := NewHistoryEntry(nil, 1, StatusPending, t0, []byte(`{"b":1,"a":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewHistoryEntry(nil, 1, StatusPending, t0, []byte("{ \"a\" : 2,\n \"b\" : 1 }"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("same document, different entries: %+v %+v", a, b)
	}
}

func TestHistoryTamperDetected(t *testing.T) {
	type edit struct {
		name    string
		mutate  func(c []HistoryEntry) []HistoryEntry
		wantAt  int
		because string
	}
	var edits []edit
	n := len(buildChain(t))
	for i := 0; i < n; i++ {
		i := i
		edits = append(edits,
			edit{fmt.Sprintf("status of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].Status = StatusFailed; return c }, i, "entry digest"},
			edit{fmt.Sprintf("at of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].At = c[i].At.Add(time.Microsecond); return c }, i, "entry digest"},
			edit{fmt.Sprintf("seq of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].Seq += 10; return c }, i, "entry digest"},
			edit{fmt.Sprintf("doc digest of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].DocDigest = Digest([]byte("forged")); return c }, i, "entry digest"},
			edit{fmt.Sprintf("prev digest of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].PrevDigest = Digest([]byte("forged")); return c }, i, "entry digest"},
			edit{fmt.Sprintf("entry digest of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].EntryDigest = Digest([]byte("forged")); return c }, i, "entry digest"},
			edit{fmt.Sprintf("uppercase doc digest of %d", i), func(c []HistoryEntry) []HistoryEntry { c[i].DocDigest = strings.ToUpper(c[i].DocDigest); return c }, i, "doc digest"},
		)
		if i < n-1 {
			// A careful forger recomputes the edited entry's own digest: the
			// next entry's link breaks instead.
			edits = append(edits, edit{fmt.Sprintf("status of %d with digest recomputed", i), func(c []HistoryEntry) []HistoryEntry {
				c[i].Status = StatusCancelled
				c[i].EntryDigest = entryDigest(c[i])
				return c
			}, i + 1, "prev digest"})
		}
	}
	for k := 1; k < n-1; k++ {
		k := k
		edits = append(edits, edit{fmt.Sprintf("delete middle %d", k), func(c []HistoryEntry) []HistoryEntry { return slices.Delete(c, k, k+1) }, k, "prev digest"})
	}
	edits = append(edits,
		edit{"delete first", func(c []HistoryEntry) []HistoryEntry { return c[1:] }, 0, "prev digest"},
		edit{"swap 1 and 2", func(c []HistoryEntry) []HistoryEntry { c[1], c[2] = c[2], c[1]; return c }, 1, "prev digest"},
		edit{"swap 0 and 1", func(c []HistoryEntry) []HistoryEntry { c[0], c[1] = c[1], c[0]; return c }, 0, "prev digest"},
		edit{"duplicate 1", func(c []HistoryEntry) []HistoryEntry { return slices.Insert(c, 2, c[1]) }, 2, "prev digest"},
		edit{"append after terminal", func(c []HistoryEntry) []HistoryEntry {
			last := c[len(c)-1]
			e := HistoryEntry{Seq: last.Seq + 1, Status: StatusFailed, At: last.At, DocDigest: last.DocDigest, PrevDigest: last.EntryDigest}
			e.EntryDigest = entryDigest(e)
			return append(c, e)
		}, n, "terminal"},
		edit{"renumber from 0 consistently", func(c []HistoryEntry) []HistoryEntry {
			prev := GenesisDigest
			for j := range c {
				c[j].Seq--
				c[j].PrevDigest = prev
				c[j].EntryDigest = entryDigest(c[j])
				prev = c[j].EntryDigest
			}
			return c
		}, 0, "seq"},
		edit{"time goes back, relinked", func(c []HistoryEntry) []HistoryEntry {
			c[2].At = c[0].At.Add(-time.Second)
			for j := 2; j < len(c); j++ {
				c[j].PrevDigest = c[j-1].EntryDigest
				c[j].EntryDigest = entryDigest(c[j])
			}
			return c
		}, 2, "before"},
	)
	for _, ed := range edits {
		chain := ed.mutate(buildChain(t))
		i, err := VerifyChain(chain)
		if i != ed.wantAt || !errors.Is(err, ErrChainBroken) {
			t.Errorf("%s: VerifyChain = %d, %v; want %d and ErrChainBroken", ed.name, i, err, ed.wantAt)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("entry %d ", ed.wantAt)) || !strings.Contains(err.Error(), ed.because) {
			t.Errorf("%s: error %q does not name entry %d and %q", ed.name, err, ed.wantAt, ed.because)
		}
	}
}

func TestNewHistoryEntryRefuses(t *testing.T) {
	first, err := NewHistoryEntry(nil, 1, StatusRunning, t0, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	done, err := NewHistoryEntry(&first, 2, StatusCompleted, t0.Add(time.Second), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func() (HistoryEntry, error){
		"first seq not 1": func() (HistoryEntry, error) { return NewHistoryEntry(nil, 2, StatusPending, t0, []byte(`{}`)) },
		"seq gap":         func() (HistoryEntry, error) { return NewHistoryEntry(&first, 3, StatusRunning, t0, []byte(`{}`)) },
		"seq repeat":      func() (HistoryEntry, error) { return NewHistoryEntry(&first, 1, StatusRunning, t0, []byte(`{}`)) },
		"time goes back": func() (HistoryEntry, error) {
			return NewHistoryEntry(&first, 2, StatusRunning, t0.Add(-time.Second), []byte(`{}`))
		},
		"after terminal": func() (HistoryEntry, error) {
			return NewHistoryEntry(&done, 3, StatusRunning, t0.Add(2*time.Second), []byte(`{}`))
		},
		"unknown status": func() (HistoryEntry, error) { return NewHistoryEntry(nil, 1, Status("queued"), t0, []byte(`{}`)) },
		"not JSON":       func() (HistoryEntry, error) { return NewHistoryEntry(nil, 1, StatusPending, t0, []byte(`{`)) },
		"zero time":      func() (HistoryEntry, error) { return NewHistoryEntry(nil, 1, StatusPending, time.Time{}, []byte(`{}`)) },
		"prev digest broken": func() (HistoryEntry, error) {
			p := first
			p.EntryDigest = "x"
			return NewHistoryEntry(&p, 2, StatusRunning, t0, []byte(`{}`))
		},
	}
	for name, f := range cases {
		if _, err := f(); !errors.Is(err, ErrInvalidHistoryEntry) {
			t.Errorf("%s: error %v, want ErrInvalidHistoryEntry", name, err)
		}
	}
}

func TestEntryDigestFrozen(t *testing.T) {
	e, err := NewHistoryEntry(nil, 1, StatusPending, t0, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	// Changing the entry encoding invalidates every stored history.
	if want := "8f4631a3955c3524d185376c5ee02d871b736eb1aee7ae47844145917f9adc4a"; e.EntryDigest != want {
		t.Errorf("EntryDigest = %s; the encoding changed (frozen %s)", e.EntryDigest, want)
	}
}
