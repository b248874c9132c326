package readmodel

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// FuzzDecodeCursor: any string either decodes to a cursor that re-encodes to itself, or is
// rejected with ErrBadCursor; it never panics.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC), uuid.MustParse("00000000-0000-0000-0000-000000000001")))
	f.Add("")
	f.Add("not-base64!")
	f.Add("MjAyNi0xMS0zMFQwMTowMjowM1p8eA")
	f.Fuzz(func(t *testing.T, s string) {
		ts, id, err := decodeCursor(s)
		if err != nil {
			if err != ErrBadCursor {
				t.Fatalf("error %v is not ErrBadCursor", err)
			}
			return
		}
		again := encodeCursor(ts, id)
		ts2, id2, err := decodeCursor(again)
		if err != nil || !ts2.Equal(ts) || id2 != id {
			t.Fatalf("cursor %q decoded to (%v, %v) but its re-encoding %q gives (%v, %v, %v)", s, ts, id, again, ts2, id2, err)
		}
	})
}
