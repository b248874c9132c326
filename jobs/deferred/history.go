package deferred

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrChainBroken is wrapped by VerifyChain when a status history has been
// edited: an entry's digest does not match its fields, a link does not match
// the entry before it, or the sequence, times or statuses are out of order.
var ErrChainBroken = errors.New("deferred: status history chain broken")

// ErrInvalidHistoryEntry is returned by NewHistoryEntry for an entry that
// cannot follow prev.
var ErrInvalidHistoryEntry = errors.New("deferred: invalid history entry")

// GenesisDigest is the PrevDigest of the first entry of every history: 64
// zeros.
const GenesisDigest = "0000000000000000000000000000000000000000000000000000000000000000"

// historyEntryVersion separates entry digests from every other SHA-256 this
// project computes, and versions their encoding.
const historyEntryVersion = "deferred-operation-history-entry.v1"

// HistoryEntry is one append-only entry of an operation's status history. It
// holds digests only, never the status document itself: DocDigest is the
// SHA-256 of the canonical status document, PrevDigest the EntryDigest of the
// entry before (GenesisDigest for the first), and EntryDigest the SHA-256 of
// the canonical encoding of (Seq, Status, At, DocDigest, PrevDigest). Any edit
// of an entry, or removal or reordering of entries, is caught by VerifyChain.
type HistoryEntry struct {
	// Seq numbers the entries 1, 2, 3, … without gaps.
	Seq int64 `json:"seq"`
	// Status is the status the document reported.
	Status Status `json:"status"`
	// At is when the entry was recorded, UTC, microsecond precision.
	At time.Time `json:"at"`
	// DocDigest is the hex SHA-256 of the canonical status document.
	DocDigest string `json:"doc_digest"`
	// PrevDigest is the EntryDigest of the previous entry, or GenesisDigest.
	PrevDigest string `json:"prev_digest"`
	// EntryDigest is the hex SHA-256 of this entry's canonical encoding.
	EntryDigest string `json:"entry_digest"`
}

// MarshalJSON writes e with At in TimeFormat.
func (e HistoryEntry) MarshalJSON() ([]byte, error) {
	type plain HistoryEntry
	return json.Marshal(struct {
		plain
		At string `json:"at"`
	}{plain(e), FormatTime(e.At)})
}

// NewHistoryEntry returns the entry that follows prev (nil for the first
// entry) for a status document recorded at at. statusDoc is any JSON encoding
// of the document (a marshalled StatusDoc, say); its canonical form is
// digested, so key order and spacing do not matter. seq must be 1 for the
// first entry and prev.Seq+1 after; at must not be before prev.At; nothing
// follows a terminal status. Errors wrap ErrInvalidHistoryEntry.
func NewHistoryEntry(prev *HistoryEntry, seq int64, status Status, at time.Time, statusDoc []byte) (HistoryEntry, error) {
	bad := func(format string, args ...any) (HistoryEntry, error) {
		return HistoryEntry{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidHistoryEntry}, args...)...)
	}
	at = NormalizeTime(at)
	if !status.Valid() {
		return bad("%v: %q", ErrUnknownStatus, status)
	}
	if err := checkTime(at); err != nil {
		return bad("at %w", err)
	}
	canon, err := CanonicalJSON(json.RawMessage(statusDoc))
	if err != nil {
		return bad("status document: %w", err)
	}
	e := HistoryEntry{Seq: seq, Status: status, At: at, DocDigest: Digest(canon), PrevDigest: GenesisDigest}
	if prev == nil {
		if seq != 1 {
			return bad("the first entry has seq %d, want 1", seq)
		}
	} else {
		switch {
		case !isDigest(prev.EntryDigest):
			return bad("previous entry digest %q is not a hex SHA-256", prev.EntryDigest)
		case seq != prev.Seq+1:
			return bad("seq %d does not follow %d", seq, prev.Seq)
		case at.Before(NormalizeTime(prev.At)):
			return bad("at %s is before the previous entry's %s", FormatTime(at), FormatTime(prev.At))
		case prev.Status.Terminal():
			return bad("nothing follows the terminal status %s", prev.Status)
		}
		e.PrevDigest = prev.EntryDigest
	}
	e.EntryDigest = entryDigest(e)
	return e, nil
}

// entryDigest is the hex SHA-256 of the canonical JSON of the entry's fields
// other than EntryDigest, with a version tag; for the first entry of a
// pending operation recorded at 2026-05-18T10:00:00Z with document {}:
//
//	{"at":"2026-05-18T10:00:00.000000Z","doc_digest":"44136fa3…","prev_digest":"0000…","seq":1,"status":"pending","v":"deferred-operation-history-entry.v1"}
func entryDigest(e HistoryEntry) string {
	// Written directly, keys in their sorted order, rather than through CanonicalJSON of a map:
	// every status change computes it, and every verification once per entry.
	b := make([]byte, 0, 320)
	b = append(b, `{"at":`...)
	b = appendString(b, FormatTime(e.At))
	b = append(b, `,"doc_digest":`...)
	b = appendString(b, e.DocDigest)
	b = append(b, `,"prev_digest":`...)
	b = appendString(b, e.PrevDigest)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"status":`...)
	b = appendString(b, string(e.Status))
	b = append(b, `,"v":`...)
	b = appendString(b, historyEntryVersion)
	return Digest(append(b, '}'))
}

// VerifyChain checks a whole status history, oldest first. It returns
// (-1, nil) when every entry is intact and linked: seq runs 1, 2, 3, …, the
// first PrevDigest is GenesisDigest and every other is the EntryDigest of the
// entry before, every EntryDigest matches its fields, times never go back,
// statuses are valid and nothing follows a terminal status. Otherwise it
// returns the index of the first broken entry and an error wrapping
// ErrChainBroken that names the entry and the reason. An empty history
// verifies.
//
// An edit that recomputes the edited entry's digest breaks the link of the
// entry after it, which is where it is reported. A history cut short at its
// end verifies: compare the last EntryDigest with a head digest stored apart
// (on the operation row) to catch that.
func VerifyChain(entries []HistoryEntry) (brokenAt int, err error) {
	for i, e := range entries {
		broken := func(format string, args ...any) (int, error) {
			return i, fmt.Errorf("%w: entry %d (seq %d): %s", ErrChainBroken, i, e.Seq, fmt.Sprintf(format, args...))
		}
		wantPrev, wantSeq := GenesisDigest, int64(1)
		if i > 0 {
			wantPrev, wantSeq = entries[i-1].EntryDigest, entries[i-1].Seq+1
		}
		switch {
		case !isDigest(e.DocDigest):
			return broken("doc digest %q is not a hex SHA-256", e.DocDigest)
		case !isDigest(e.PrevDigest):
			return broken("prev digest %q is not a hex SHA-256", e.PrevDigest)
		case e.EntryDigest != entryDigest(e):
			return broken("entry digest does not match its fields")
		case e.PrevDigest != wantPrev:
			return broken("prev digest does not match the entry before")
		case e.Seq != wantSeq:
			return broken("seq %d, want %d", e.Seq, wantSeq)
		case !e.Status.Valid():
			return broken("unknown status %q", e.Status)
		case i > 0 && NormalizeTime(e.At).Before(NormalizeTime(entries[i-1].At)):
			return broken("at %s is before the entry before", FormatTime(e.At))
		case i > 0 && entries[i-1].Status.Terminal():
			return broken("follows the terminal status %s", entries[i-1].Status)
		}
	}
	return -1, nil
}

// isDigest reports whether s is a lowercase hex SHA-256.
func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
