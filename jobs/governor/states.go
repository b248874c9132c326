package governor

import (
	"context"
	"fmt"
	"time"
)

// Where a limit in force comes from.
const (
	// SourceConfigured: the deployment set it (ASTERION_PROVIDER_RPM or _TPM).
	SourceConfigured = "configured"
	// SourceLearned: the provider reported it in its rate-limit headers.
	SourceLearned = "learned"
	// SourceNone: no limit is known, so none is kept.
	SourceNone = "none"
)

// State is one model's limiter as operators see it: the limits in force and where they come
// from, and whether calls are held by a provider's pause or an operator's.
type State struct {
	ModelState
	// RPM and TPM are the limits in force (zero: none); RPMSource and TPMSource say where
	// they come from.
	RPM, TPM             int
	RPMSource, TPMSource string
	// Now is the database's clock at the read, against which PausedUntil is judged.
	Now time.Time
}

// ProviderPaused reports whether a provider's Retry-After (or an exhausted limit) still holds
// every call to the model.
func (s State) ProviderPaused() bool { return s.PausedUntil != nil && s.PausedUntil.After(s.Now) }

// PauseRole is the role of who holds the model now: the operator pause's role (RoleAdmin for
// a pause recorded before roles were), RoleProvider while only the provider's pause holds it,
// "" when nothing does.
func (s State) PauseRole() string {
	switch {
	case s.OperatorPaused && s.PausedRole != "":
		return s.PausedRole
	case s.OperatorPaused:
		return RoleAdmin
	case s.ProviderPaused():
		return RoleProvider
	}
	return ""
}

func limitSource(configured, learned int) (int, string) {
	switch {
	case configured > 0:
		return configured, SourceConfigured
	case learned > 0:
		return learned, SourceLearned
	}
	return 0, SourceNone
}

// States returns every model the governor has seen, by name, with the limits in force.
func (g *Governor) States(ctx context.Context) ([]State, error) {
	models, err := g.Models(ctx)
	if err != nil {
		return nil, err
	}
	// The clock is read after the rows, so that it is never earlier than a pause's start
	// that the rows show: a pause then never seems longer than it was set for.
	var now time.Time
	if err := g.cfg.DB.NewSelect().ColumnExpr("clock_timestamp()").Scan(ctx, &now); err != nil {
		return nil, fmt.Errorf("read the database clock: %w", err)
	}
	out := make([]State, len(models))
	for i, m := range models {
		st := State{ModelState: m, Now: now}
		st.RPM, st.RPMSource = limitSource(g.cfg.RPM, m.LearnedRPM)
		st.TPM, st.TPMSource = limitSource(g.cfg.TPM, m.LearnedTPM)
		out[i] = st
	}
	return out, nil
}
