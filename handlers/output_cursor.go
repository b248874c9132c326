package handlers

import "asterion/db"

// chunkCursor is where a stream of a job's output stands: the attempt and seq of the last chunk
// it sent (seq 0: none of that attempt yet). Every stream that follows a job's chunks live
// places each one the same way.
type chunkCursor struct {
	attempt, seq int
}

// chunkPlace is where a live chunk falls against a cursor.
type chunkPlace int

const (
	// chunkNext is the chunk that comes next: send it.
	chunkNext chunkPlace = iota
	// chunkSent was sent already (or belongs to an earlier attempt): skip it.
	chunkSent
	// chunkAfterGap comes after chunks not seen yet: read what is missing first.
	chunkAfterGap
)

// place says where c falls against the cursor.
func (k chunkCursor) place(c db.OutputChunk) chunkPlace {
	switch {
	case c.Attempt < k.attempt || (c.Attempt == k.attempt && c.Seq <= k.seq):
		return chunkSent
	case c.Attempt > k.attempt || c.Seq > k.seq+1:
		return chunkAfterGap
	}
	return chunkNext
}
