package jobs

import (
	"context"
	"errors"
	"time"

	"asterion/db"
	"asterion/jobs/provider"
	"asterion/jobs/usage"
)

// defaultModeler is a provider that names the model it calls when a prompt names none.
type defaultModeler interface {
	DefaultModel() string
}

// attemptModel is the model an attempt called: the provider's word for a success, else the
// model asked for or the provider's default.
func (s *calls) attemptModel(asked string, resp provider.Response, callErr error) string {
	if callErr == nil && resp.Model != "" {
		return resp.Model
	}
	return s.modelOf(asked)
}

// attemptUsage is what an attempt used, as the meter prices it, nil without a meter.
func (s *calls) attemptUsage(job db.Job, askedModel string, resp provider.Response, callErr error) *attemptRow {
	if s.cfg.Usage == nil {
		return nil
	}
	u := usage.AttemptUsage{JobID: job.ID, Attempt: job.Attempt, OrgID: job.OrgID,
		Model: s.attemptModel(askedModel, resp, callErr), StartedAt: time.Now()}
	if job.StartedAt != nil {
		u.StartedAt = *job.StartedAt
	}
	if callErr == nil {
		u.InputTokens, u.OutputTokens = resp.PromptTokens, resp.CompletionTokens
	} else {
		perr := provider.Classify(callErr)
		u.InputTokens, u.OutputTokens = perr.Partial.PromptTokens, perr.Partial.CompletionTokens
		switch {
		case errors.Is(callErr, errShutdown):
			u.ErrorKind = KindShutdown
		case !provider.IsCanceled(callErr):
			u.ErrorKind = string(perr.Kind)
		}
	}
	row, shard := s.cfg.Usage.Row(u)
	return &attemptRow{usage: u, row: row, shard: shard}
}

// attemptRow is an attempt's usage ready to write: as the caller knows it, and priced.
type attemptRow struct {
	usage usage.AttemptUsage
	row   db.Attempt
	shard int
}

// args are the values of finishUsageSQL's placeholders.
func (r *attemptRow) args() []any {
	var errorKind any
	if r.row.ErrorKind != nil {
		errorKind = *r.row.ErrorKind
	}
	return []any{r.row.Attempt, r.row.OrgID, r.row.Model, r.row.StartedAt, errorKind, r.row.InputTokens,
		r.row.OutputTokens, r.row.CostUSD, r.shard}
}

// recordAttempt writes what an attempt used as soon as its call returns, whatever becomes of
// its result: a late or cut answer was still spent. It is its own statement, so a crash before
// the job settles loses no usage, and a failure to write it loses no result. A success's usage
// travels in its finish's statement instead (settleUsage).
func (s *calls) recordAttempt(ctx context.Context, job db.Job, askedModel string, resp provider.Response, callErr error) {
	s.writeUsage(ctx, s.attemptUsage(job, askedModel, resp, callErr))
}

// writeUsage writes r alone; an attempt already recorded is not counted again.
func (s *calls) writeUsage(ctx context.Context, r *attemptRow) {
	if r == nil {
		return
	}
	if _, err := s.cfg.Usage.Record(ctx, s.db, r.usage); err != nil {
		s.log.Warn("recording an attempt's usage failed", "job_id", r.usage.JobID, "attempt", r.usage.Attempt, "err", err)
	}
}

// settleUsage ends the usage of a success whose finish carried it: counted when the finish
// wrote it, written alone when the finish did not apply (a late result, which was still
// spent) or failed.
func (s *calls) settleUsage(ctx context.Context, r *attemptRow, written bool) {
	switch {
	case r == nil:
	case written:
		s.cfg.Usage.Counted(r.row)
	default:
		s.writeUsage(ctx, r)
	}
}

// Meter is the usage meter of the service, nil when none is configured.
func (s *Service) Meter() *usage.Meter { return s.cfg.Usage }
