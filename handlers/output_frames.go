package handlers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"github.com/google/uuid"

	"asterion/db"
)

// outputFramesKept is how many encoded job.output events the cache holds: a few flushes' worth
// of chunks of every execution running at once, so each chunk is encoded once however many
// streams carry it.
const outputFramesKept = 8192

// outputFrames caches the encoded job.output event of each chunk. One chunk goes to every
// stream that may see it, and the event is the same bytes on all of them, so encoding it once
// spares the streams the JSON encoding each of them would otherwise repeat. The oldest entries
// go first once the cache is full; an evicted chunk still on its way is simply encoded again.
type outputFrames struct {
	mu     sync.Mutex
	frames map[frameKey][]byte
	// ring holds the cached keys in insertion order; next is where the following key goes.
	ring []frameKey
	next int
}

// frameKey names a chunk: its execution and seq.
type frameKey struct {
	job     uuid.UUID
	attempt int
	seq     int
}

func newOutputFrames(kept int) *outputFrames {
	return &outputFrames{frames: make(map[frameKey][]byte, kept), ring: make([]frameKey, 0, kept)}
}

// frame returns the whole SSE event (name, data lines, blank line) of c. The bytes are shared:
// callers only read them.
func (f *outputFrames) frame(c db.OutputChunk) ([]byte, error) {
	k := frameKey{c.JobID, c.Attempt, c.Seq}
	f.mu.Lock()
	b, ok := f.frames[k]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := encodeOutputEvent(c)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.frames[k]; ok {
		return old, nil // another stream encoded it meanwhile
	}
	if len(f.ring) < cap(f.ring) {
		f.ring = append(f.ring, k)
	} else {
		delete(f.frames, f.ring[f.next])
		f.ring[f.next] = k
		f.next = (f.next + 1) % len(f.ring)
	}
	f.frames[k] = b
	return b, nil
}

// encodeOutputEvent encodes c as one job.output event.
func encodeOutputEvent(c db.OutputChunk) ([]byte, error) {
	data, err := json.Marshal(struct {
		PromptID uuid.UUID `json:"prompt_id"`
		JobID    uuid.UUID `json:"job_id"`
		Seq      int       `json:"seq"`
		Text     string    `json:"text"`
		// At is when the chunk was stored, so a client can tell how long it took to arrive.
		At time.Time `json:"at"`
	}{c.PromptID, c.JobID, c.Seq, c.Text, c.At})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := bufio.NewWriterSize(&buf, len(data)+64)
	if err := writeSSEData(w, "job.output", data); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
