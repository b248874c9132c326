package handlers

import (
	"context"

	"asterion/db"
	"asterion/jobs/usage"
)

// progressJSON is what a job's current attempt has written so far.
type progressJSON struct {
	OutputChunks int `json:"output_chunks"`
	OutputTokens int `json:"output_tokens"`
}

// attemptUsageJSON is one attempt's usage.
type attemptUsageJSON struct {
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Model        string  `json:"model,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
}

// attemptJSON is one attempt of a job.
type attemptJSON struct {
	Attempt    int              `json:"attempt"`
	StartedAt  *string          `json:"started_at"`
	FinishedAt *string          `json:"finished_at"`
	ErrorKind  *string          `json:"error_kind"`
	Usage      attemptUsageJSON `json:"usage"`
}

// jobUsageJSON is the usage, progress and attempts of a job's detail.
type jobUsageJSON struct {
	Progress progressJSON  `json:"progress"`
	Usage    usage.Total   `json:"usage"`
	Attempts []attemptJSON `json:"attempts"`
}

// jobUsageOf reads a job's progress and its attempts' usage. The attempt running now has no
// usage row yet: it is listed with what it has written so far.
func (s *Server) jobUsageOf(ctx context.Context, j db.Job) (jobUsageJSON, error) {
	chunks, pieces, err := s.deps.Reads.OutputProgress(ctx, j)
	if err != nil {
		return jobUsageJSON{}, err
	}
	rows, total, err := s.deps.Reads.JobUsage(ctx, j.ID)
	if err != nil {
		return jobUsageJSON{}, err
	}
	out := jobUsageJSON{Progress: progressJSON{OutputChunks: chunks, OutputTokens: pieces}, Usage: total,
		Attempts: make([]attemptJSON, 0, len(rows)+1)}
	seen := map[int]bool{}
	for _, a := range rows {
		started, finished := a.StartedAt, a.FinishedAt
		out.Attempts = append(out.Attempts, attemptJSON{Attempt: a.Attempt, StartedAt: tsp(&started), FinishedAt: tsp(&finished),
			ErrorKind: a.ErrorKind, Usage: attemptUsageJSON{InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
				Model: a.Model, CostUSD: a.CostUSD}})
		seen[a.Attempt] = true
	}
	if j.State == "running" && !seen[j.Attempt] {
		out.Attempts = append(out.Attempts, attemptJSON{Attempt: j.Attempt, StartedAt: tsp(j.StartedAt),
			Usage: attemptUsageJSON{OutputTokens: pieces}})
	}
	return out, nil
}
