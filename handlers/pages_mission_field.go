package handlers

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// missionField reads the field of v, for a page whose CSRF token is csrf: its newest prompts,
// in threads, with the output of the drops that show some. It reads the versions of the drops
// first; the settled drops already in the server's drop cache at those versions come from
// there, rendered, and only the others are read in full (one more query, none when all hit).
// The settled drops read in full are rendered and stored for the next read.
func (s *Server) missionField(ctx context.Context, v jobs.Viewer, csrf string) (views.MissionField, missionRender, error) {
	asOf, versions, err := s.deps.Reads.MissionVersions(ctx, v, missionMaxDrops)
	if err != nil {
		return views.MissionField{}, missionRender{}, err
	}
	hits := make(map[string]*missionDropEntry, len(versions))
	var missing []uuid.UUID
	for _, mv := range versions {
		if e, ok := s.dropCache.lookup(mv); ok {
			hits[e.drop.PromptID] = e
		} else {
			missing = append(missing, mv.PromptID)
		}
	}
	fresh, err := s.deps.Reads.MissionPrompts(ctx, v, missing)
	if err != nil {
		return views.MissionField{}, missionRender{}, err
	}
	r, err := s.missionRendered(ctx, fresh)
	if err != nil {
		return views.MissionField{}, missionRender{}, err
	}
	read := make(map[string]readmodel.MissionItem, len(fresh))
	for _, it := range fresh {
		read[it.Prompt.ID.String()] = it
	}
	// The cached drops join the fresh ones: the slices are sized once for the whole field.
	r.drops = append(make([]views.MissionDrop, 0, len(r.drops)+len(hits)), r.drops...)
	r.items = append(make([]readmodel.MissionItem, 0, len(r.items)+len(hits)), r.items...)
	for _, mv := range versions {
		if e := hits[mv.PromptID.String()]; e != nil {
			r.drops = append(r.drops, e.drop)
			r.items = append(r.items, e.item)
		}
	}
	field := views.BuildMissionField(r.drops, asOf)
	for ti := range field.Threads {
		for di := range field.Threads[ti].Drops {
			d := &field.Threads[ti].Drops[di]
			e := hits[d.PromptID]
			if e != nil {
				if m, ok := e.markupFor(d.Depth, csrf); ok {
					d.Markup = m
					continue
				}
			} else if it, ok := read[d.PromptID]; ok && settledBefore(it, asOf) {
				e = &missionDropEntry{version: versionOf(it), item: slimMissionItem(it), drop: *d}
				e.drop.Depth = -1
			} else {
				continue
			}
			d.Markup = s.storeMissionDrop(ctx, e, *d, csrf)
		}
	}
	return field, r, nil
}

// settledBefore reports whether a drop read at as_of asOf may be cached: its newest job is
// terminal, and it became so before asOf, so every transaction that started before that change
// (a late output write among them) had ended when the drop was read.
func settledBefore(it readmodel.MissionItem, asOf time.Time) bool {
	return jobs.State(it.Job.State).Terminal() && it.Job.UpdatedAt.Before(asOf)
}

// slimMissionItem is what a mission stream keeps of a cached drop's item (see rendered).
func slimMissionItem(it readmodel.MissionItem) readmodel.MissionItem {
	return readmodel.MissionItem{Prompt: db.Entity{ID: it.Prompt.ID, Kind: it.Prompt.Kind}, Job: db.Job{ID: it.Job.ID,
		PromptID: it.Job.PromptID, State: it.Job.State, Attempt: it.Job.Attempt, UpdatedAt: it.Job.UpdatedAt}}
}

// storeMissionDrop renders d (base's drop at its depth in the field) for a page with token
// csrf, stores the rendering in the cache as a new entry like base, and returns the markup;
// "" when it could not render (the page then renders the drop itself).
func (s *Server) storeMissionDrop(ctx context.Context, base *missionDropEntry, d views.MissionDrop, csrf string) string {
	var b strings.Builder
	if err := views.MissionDropView(d, csrf, false).Render(ctx, &b); err != nil {
		return ""
	}
	e := *base
	e.markup, e.depth = b.String(), d.Depth
	// A token that is not in the markup does not change it: the entry serves every page.
	e.csrfBound = csrf != "" && strings.Contains(e.markup, csrf)
	e.csrf = ""
	if e.csrfBound {
		e.csrf = csrf
	}
	s.dropCache.store(&e)
	return e.markup
}
