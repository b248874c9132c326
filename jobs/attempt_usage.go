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

// recordAttempt writes what an attempt used as soon as its call returns, whatever becomes of
// its result: a late or cut answer was still spent. It is its own statement, so a crash before
// the job settles loses no usage, and a failure to write it loses no result.
func (s *calls) recordAttempt(ctx context.Context, job db.Job, askedModel string, resp provider.Response, callErr error) {
	if s.cfg.Usage == nil {
		return
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
	if _, err := s.cfg.Usage.Record(ctx, s.db, u); err != nil {
		s.log.Warn("recording an attempt's usage failed", "job_id", job.ID, "attempt", job.Attempt, "err", err)
	}
}

// Meter is the usage meter of the service, nil when none is configured.
func (s *Service) Meter() *usage.Meter { return s.cfg.Usage }
