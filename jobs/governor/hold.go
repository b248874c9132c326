package governor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Hold is what keeps a model's calls back at one moment, whatever slots were granted before it.
type Hold struct {
	// Paused means an operator paused the model.
	Paused bool
	// Wait is how long the provider's pause (a 429's Retry-After, an exhausted limit) still
	// holds the model; zero when none does.
	Wait time.Duration
}

// Held reports whether anything holds model now. A slot is granted up to the horizon ahead,
// and a pause that arrives while its call waits for it holds that call too: after a 429 no
// process calls the model again before its Retry-After has passed, including a call whose
// slot was granted before the 429. A caller that waited for its slot asks this before calling.
func (g *Governor) Held(ctx context.Context, model string) (Hold, error) {
	var (
		h    Hold
		secs float64
	)
	err := g.cfg.DB.DB.QueryRowContext(ctx, heldSQL, model).Scan(&h.Paused, &secs)
	if errors.Is(err, sql.ErrNoRows) {
		return Hold{}, nil
	}
	if err != nil {
		return Hold{}, fmt.Errorf("read what holds model %s: %w", model, err)
	}
	h.Wait = time.Duration(secs * float64(time.Second))
	return h, nil
}
