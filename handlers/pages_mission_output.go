package handlers

import (
	"bufio"
	"bytes"
	"context"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/eta"
	"asterion/jobs/output"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// missionRender is a rendering of drops: the drops, the items they came from and the output
// heads they include (by job id), so that a stream knows which chunks the page already has.
type missionRender struct {
	drops []views.MissionDrop
	items []readmodel.MissionItem
	heads map[uuid.UUID]db.OutputHead
}

// missionRendered turns items into drops (depth unknown) with the output of the drops that
// show some, read for all of them at once.
func (s *Server) missionRendered(ctx context.Context, items []readmodel.MissionItem) (missionRender, error) {
	heads, err := s.deps.Reads.MissionOutput(ctx, items)
	if err != nil {
		return missionRender{}, err
	}
	// One estimate read for every queued drop of the rendering, none when no drop is queued.
	var queued []uuid.UUID
	for _, it := range items {
		if it.Job.State == string(jobs.StateQueued) {
			queued = append(queued, it.Job.ID)
		}
	}
	var etas map[uuid.UUID]eta.ETA
	if len(queued) > 0 {
		if etas, err = s.deps.Jobs.ETAs().Jobs(ctx, queued); err != nil {
			return missionRender{}, err
		}
	}
	drops := make([]views.MissionDrop, len(items))
	for i, it := range items {
		var out *db.OutputHead
		if h, ok := heads[it.Job.ID]; ok {
			out = &h
		}
		drops[i] = missionDropOf(it, out)
		if est, ok := etas[it.Job.ID]; ok {
			withETA(&drops[i], est)
		}
	}
	return missionRender{drops: drops, items: items, heads: heads}, nil
}

// outputMark is what the page has of one job's output: the attempt and last seq its output
// element holds and how many characters, whether it still grows (a running drop) and whether
// it was cut at readmodel.MissionOutputCap (then nothing more is appended, as a reload shows).
type outputMark struct {
	prompt              uuid.UUID
	attempt, seq, chars int
	live, cut           bool
}

// outputEpoch is a since that every job's updated_at is after: a drop read back by id only.
var outputEpoch = time.Unix(0, 0)

func (m *missionStreamer) outputFilter() output.Filter { return output.Filter{Scope: m.scope} }

// rendered records what a rendering put on the page: a running drop's output up to its head's
// last seq; a settled drop's output is final (or it shows its response), so later chunks of its
// job are skipped; a queued drop has no output yet.
func (m *missionStreamer) rendered(r missionRender) {
	for _, it := range r.items {
		switch {
		case it.Job.State == string(jobs.StateRunning):
			h := r.heads[it.Job.ID]
			m.marks[it.Job.ID] = outputMark{prompt: it.Prompt.ID, attempt: it.Job.Attempt, seq: h.LastSeq,
				chars: utf8.RuneCountInString(h.Text), live: true, cut: h.Cut}
		case jobs.State(it.Job.State).Terminal():
			m.marks[it.Job.ID] = outputMark{prompt: it.Prompt.ID, attempt: it.Job.Attempt}
		default:
			delete(m.marks, it.Job.ID)
		}
	}
}

// chunk appends a chunk to its drop's output, in order: a chunk the page already has is
// skipped, a gap is filled from the table first, and a job the page does not show running yet
// (its running state not rendered, or a new attempt) gets its drop rendered again, with its
// output so far.
func (m *missionStreamer) chunk(ctx context.Context, w *bufio.Writer, c db.OutputChunk) error {
	mk, ok := m.marks[c.JobID]
	switch {
	case !ok || c.Attempt > mk.attempt:
		return m.rerender(ctx, w, c.PromptID, c.JobID)
	case !mk.live || mk.cut || c.Attempt < mk.attempt || c.Seq <= mk.seq:
		return nil
	case c.Seq > mk.seq+1:
		page, err := m.s.deps.Reads.Output(ctx, m.v, c.JobID, mk.seq, 0)
		if err != nil {
			return err
		}
		if page.Job.Attempt != mk.attempt {
			return m.rerender(ctx, w, c.PromptID, c.JobID)
		}
		for _, g := range page.Chunks {
			if err := m.appendChunk(ctx, w, g); err != nil {
				return err
			}
		}
		return nil
	}
	return m.appendChunk(ctx, w, c)
}

// appendChunk sends c as an out-of-band append to its drop's output element, cut where a
// reload would cut it.
func (m *missionStreamer) appendChunk(ctx context.Context, w *bufio.Writer, c db.OutputChunk) error {
	mk := m.marks[c.JobID]
	if mk.cut || c.Seq != mk.seq+1 {
		return nil
	}
	text := c.Text
	n := utf8.RuneCountInString(text)
	if mk.chars+n > readmodel.MissionOutputCap {
		text, _ = db.CutRunes(text, readmodel.MissionOutputCap-mk.chars)
		text += missionCutMark
		mk.cut = true
	}
	mk.seq, mk.chars = c.Seq, mk.chars+n
	m.marks[c.JobID] = mk
	return writeMissionFragment(ctx, w, views.MissionOutputAppend(c.JobID.String(), text))
}

// rerender sends a prompt's drop as it is now, with its output so far.
func (m *missionStreamer) rerender(ctx context.Context, w *bufio.Writer, promptID, jobID uuid.UUID) error {
	r, err := m.s.missionDropsByID(ctx, m.v, map[uuid.UUID]bool{promptID: true}, outputEpoch)
	if err != nil {
		return err
	}
	m.rendered(r)
	if _, ok := m.marks[jobID]; !ok {
		// Not the prompt's current job, or not one the field shows: nothing to append to.
		m.marks[jobID] = outputMark{}
	}
	if len(r.drops) == 0 {
		return nil
	}
	return writeMissionFragment(ctx, w, views.MissionDrops(r.drops, m.csrf))
}

// resyncOutput renders the drops of every job the page shows running again, after the output
// subscription fell behind: their output as it is now replaces what the page has.
func (m *missionStreamer) resyncOutput(ctx context.Context, w *bufio.Writer) error {
	ids := map[uuid.UUID]bool{}
	for _, mk := range m.marks {
		if mk.live {
			ids[mk.prompt] = true
		}
	}
	if len(ids) == 0 {
		return nil
	}
	r, err := m.s.missionDropsByID(ctx, m.v, ids, outputEpoch)
	if err != nil {
		return err
	}
	m.rendered(r)
	if len(r.drops) == 0 {
		return nil
	}
	return writeMissionFragment(ctx, w, views.MissionDrops(r.drops, m.csrf))
}

// writeMissionFragment renders comp as one "drop" event, left for the stream to flush.
func writeMissionFragment(ctx context.Context, w *bufio.Writer, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		return err
	}
	return writeSSEData(w, missionEventName, buf.Bytes())
}
