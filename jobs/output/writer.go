package output

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
)

// Channel is the notification channel on which writers announce stored chunks.
const Channel = "asterion_output"

// MaxFlushEvery is the longest a writer may hold text before storing it (readers see
// a running answer grow at least every 250 ms).
const MaxFlushEvery = 250 * time.Millisecond

// maxChunksPerStatement bounds one insert; a flush of more executions takes several.
const maxChunksPerStatement = 2000

// WriterConfig configures a Writer.
type WriterConfig struct {
	// DB is where chunks are stored. Required.
	DB *bun.DB
	// Logger receives flush failures. Default slog.Default().
	Logger *slog.Logger
	// FlushEvery is how often pending text is stored, in (0, MaxFlushEvery]. Default
	// MaxFlushEvery.
	FlushEvery time.Duration
	// Tag names this process's flushes in their announcements, so its own hub can skip them.
	// Default: random.
	Tag string
	// Publish, when set, receives every stored chunk at once, in order per execution (the
	// process's own hub).
	Publish func([]db.OutputChunk)
}

// validate applies defaults and rejects bad values.
func (c *WriterConfig) validate() error {
	if c.DB == nil {
		return errors.New("output writer: DB is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FlushEvery == 0 {
		c.FlushEvery = MaxFlushEvery
	}
	if c.FlushEvery < 0 || c.FlushEvery > MaxFlushEvery {
		return fmt.Errorf("output writer: FlushEvery %s is outside (0, %s]", c.FlushEvery, MaxFlushEvery)
	}
	if c.Tag == "" {
		c.Tag = NewTag()
	}
	if strings.ContainsAny(c.Tag, " \n") {
		return fmt.Errorf("output writer: Tag %q holds white space", c.Tag)
	}
	return nil
}

// NewTag returns a random tag for a process's writer and hub.
func NewTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Writer stores the output of the executions of one process.
type Writer struct {
	cfg WriterConfig

	mu      sync.Mutex
	streams map[*Stream]struct{}
	// opened numbers the streams, the order in which a flush takes their flush locks.
	opened uint64
	// looping is set while loop runs.
	looping bool
}

// NewWriter validates cfg and returns a writer.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Writer{cfg: cfg, streams: map[*Stream]struct{}{}}, nil
}

// Tag is the tag of this writer's announcements.
func (w *Writer) Tag() string { return w.cfg.Tag }

// loop flushes every FlushEvery while streams are open; Open starts it and it ends with the
// last stream, so an idle writer runs nothing.
func (w *Writer) loop() {
	t := time.NewTicker(w.cfg.FlushEvery)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.streams) == 0 {
			w.looping = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.flushOpen(ctx, false); err != nil {
			w.cfg.Logger.Warn("storing live output failed; it is kept and retried", "err", err)
		}
		cancel()
	}
}

// Ref names the execution a stream writes for.
type Ref struct {
	JobID   uuid.UUID
	Attempt int
	// Claim is the execution's claim; a chunk is kept only while the job holds it.
	Claim string
}

// Open starts the output of one execution. Close it when the execution ends.
func (w *Writer) Open(ref Ref) *Stream {
	s := &Stream{w: w, ref: ref, next: 1}
	w.mu.Lock()
	w.opened++
	s.id = w.opened
	w.streams[s] = struct{}{}
	start := !w.looping
	w.looping = true
	w.mu.Unlock()
	if start {
		go w.loop()
	}
	return s
}

// Flush stores the pending text of every open stream now, as one chunk each.
func (w *Writer) Flush(ctx context.Context) error { return w.flushOpen(ctx, true) }

// flushOpen stores the pending text of every open stream; wait is flush's.
func (w *Writer) flushOpen(ctx context.Context, wait bool) error {
	w.mu.Lock()
	streams := make([]*Stream, 0, len(w.streams))
	for s := range w.streams {
		streams = append(streams, s)
	}
	w.mu.Unlock()
	slices.SortFunc(streams, func(a, b *Stream) int { return cmp.Compare(a.id, b.id) })
	return w.flush(ctx, streams, wait)
}

// flush stores the pending text of streams, given in the order they were opened. A failed
// statement leaves its chunks with their streams, to go again with the next flush under the
// same numbers.
//
// A stream's chunks are in at most one flush at a time (its flush lock), so they are stored
// and published in order, and a failed chunk goes back before any later one is sent. Streams
// of different executions flush side by side: a closing execution waits for its own chunks,
// never for another's statement. With wait, flush waits for the locks, taken in the order the
// streams were opened so that two waiting flushes cannot hold each other up; without it (the
// writer's own ticks) a stream already being flushed is left to the next tick.
func (w *Writer) flush(ctx context.Context, streams []*Stream, wait bool) error {
	held := make([]*Stream, 0, len(streams))
	defer func() {
		for _, s := range held {
			s.flushing.Unlock()
		}
	}()
	var batch []db.PendingChunk
	owners := map[chunkKey]*Stream{}
	for _, s := range streams {
		if wait {
			s.flushing.Lock()
		} else if !s.flushing.TryLock() {
			continue
		}
		unsent := s.takeUnsent()
		if len(unsent) == 0 {
			// Nothing of the stream travels in this flush, which keeps no lock of it.
			s.flushing.Unlock()
			continue
		}
		held = append(held, s)
		for _, c := range unsent {
			batch = append(batch, c)
			owners[chunkKey{c.JobID, c.Attempt, c.Seq}] = s
		}
	}
	var errs []error
	for len(batch) > 0 {
		n := min(len(batch), maxChunksPerStatement)
		part := batch[:n]
		batch = batch[n:]
		stored, err := db.InsertOutput(ctx, w.cfg.DB, part, Channel, w.cfg.Tag)
		if err != nil {
			for _, c := range part {
				owners[chunkKey{c.JobID, c.Attempt, c.Seq}].giveBack(c)
			}
			errs = append(errs, err)
			continue
		}
		kept := make(map[chunkKey]bool, len(stored))
		for _, c := range stored {
			kept[chunkKey{c.JobID, c.Attempt, c.Seq}] = true
		}
		for _, c := range part {
			k := chunkKey{c.JobID, c.Attempt, c.Seq}
			owners[k].settled(kept[k])
		}
		if len(stored) > 0 && w.cfg.Publish != nil {
			w.cfg.Publish(stored)
		}
	}
	return errors.Join(errs...)
}

// chunkKey names a chunk.
type chunkKey struct {
	job     uuid.UUID
	attempt int
	seq     int
}

// Stream is the output of one execution.
type Stream struct {
	w   *Writer
	ref Ref
	// id is the stream's number in its writer, the order of flush locks.
	id uint64
	// flushing is held by the flush carrying the stream's chunks.
	flushing sync.Mutex

	mu sync.Mutex
	// pending is text written since the last chunk was cut, in pendingPieces pieces.
	pending       strings.Builder
	pendingPieces int
	// unsent are cut chunks not yet stored (a failed flush gives them back here).
	unsent []db.PendingChunk
	next   int
	// text is everything written; pieces counts its pieces.
	text   strings.Builder
	pieces int
	// stored counts chunks the database kept; dropped counts those it refused.
	stored, dropped int
	closed          bool
}

// Write adds a piece of text to the execution's output.
func (s *Stream) Write(piece string) {
	if piece == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pending.WriteString(piece)
	s.pendingPieces++
	s.text.WriteString(piece)
	s.pieces++
}

// takeUnsent cuts the pending text into a chunk and returns every chunk not yet stored.
func (s *Stream) takeUnsent() []db.PendingChunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending.Len() > 0 {
		s.unsent = append(s.unsent, db.PendingChunk{JobID: s.ref.JobID, Attempt: s.ref.Attempt, Seq: s.next,
			Text: s.pending.String(), Pieces: s.pendingPieces, Claim: s.ref.Claim})
		s.next++
		s.pending.Reset()
		s.pendingPieces = 0
	}
	out := s.unsent
	s.unsent = nil
	return out
}

// giveBack returns a chunk whose flush failed, keeping seq order.
func (s *Stream) giveBack(c db.PendingChunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for i < len(s.unsent) && s.unsent[i].Seq < c.Seq {
		i++
	}
	s.unsent = append(s.unsent, db.PendingChunk{})
	copy(s.unsent[i+1:], s.unsent[i:])
	s.unsent[i] = c
}

// settled records what the database did with a chunk: kept, or refused because the job no
// longer runs this execution (or already held the chunk from a flush whose answer was lost).
func (s *Stream) settled(kept bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept {
		s.stored++
	} else {
		s.dropped++
	}
}

// Progress is what an execution has written so far.
type Progress struct {
	// Chunks is how many chunks were cut (stored or on their way).
	Chunks int
	// Pieces is how many pieces the provider produced, about one token each.
	Pieces int
}

// Progress returns what the stream has written so far.
func (s *Stream) Progress() Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	chunks := s.next - 1
	if s.pending.Len() > 0 {
		chunks++
	}
	return Progress{Chunks: chunks, Pieces: s.pieces}
}

// Text returns everything written so far: the concatenation of the stream's chunks.
func (s *Stream) Text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text.String()
}

// Close stores what is pending and ends the stream; writes after it are ignored. A failed
// store is tried again twice; the error says some chunk could not be stored (it is lost with
// the stream).
func (s *Stream) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.w.flush(ctx, []*Stream{s}, true)
	for wait := 100 * time.Millisecond; err != nil && wait <= 200*time.Millisecond && ctx.Err() == nil; wait *= 2 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		err = s.w.flush(ctx, []*Stream{s}, true)
	}
	s.w.mu.Lock()
	delete(s.w.streams, s)
	s.w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("store the last output of job %s: %w", s.ref.JobID, err)
	}
	return nil
}
