package admit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"asterion/jobs/provider"
)

// defaultOutputEstimate is the output a job without max_tokens is expected to write on a
// model that has no attempts yet.
const defaultOutputEstimate = 256

// meanOutputs remembers each model's mean output for a while: the estimate needs no better
// freshness than a few seconds, and a submit should not pay a read for it.
type meanOutputs struct {
	mu   sync.Mutex
	byID map[string]meanOutput
}

type meanOutput struct {
	tokens int
	at     time.Time
}

// estimate is the reservation of a job: its text's input tokens plus maxTokens, or without
// one the mean output of the model's last 100 attempts (defaultOutputEstimate before any).
func (a *Admission) estimate(ctx context.Context, model, text string, maxTokens int) (int, error) {
	in := provider.EstimateTokens(text)
	if maxTokens > 0 {
		return in + maxTokens, nil
	}
	out, err := a.meanOutput(ctx, model)
	if err != nil {
		return 0, err
	}
	return in + out, nil
}

// meanOutput is model's mean output, read at most once per MeanOutputTTL.
func (a *Admission) meanOutput(ctx context.Context, model string) (int, error) {
	now := a.cfg.Now()
	a.means.mu.Lock()
	m, ok := a.means.byID[model]
	a.means.mu.Unlock()
	if ok && now.Sub(m.at) < a.cfg.MeanOutputTTL {
		return m.tokens, nil
	}
	var mean *float64
	if err := a.cfg.DB.DB.QueryRowContext(ctx, meanOutputSQL, model).Scan(&mean); err != nil {
		return 0, fmt.Errorf("read the mean output of model %q: %w", model, err)
	}
	tokens := defaultOutputEstimate
	if mean != nil {
		tokens = int(*mean)
	}
	a.means.mu.Lock()
	a.means.byID[model] = meanOutput{tokens: tokens, at: now}
	a.means.mu.Unlock()
	return tokens, nil
}
