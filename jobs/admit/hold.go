package admit

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"asterion/db"
)

// A budget row locked inside the transaction that writes a job stays locked until that
// transaction's durable commit, so every admission of one org waits for the whole
// transaction of the one before it: one busy org's submits go one transaction at a time. The
// submit path instead holds its reservations ahead of that transaction, in one statement of
// their own that locks the budget rows only while it runs and commits without waiting for the
// disk; the transaction writing the jobs then takes the hold, which makes the hold's
// reservation its jobs' (see db/functions/asterion_budget_hold.sql). The check and the
// reservation stay one step across every process, under the same rule as Reserve's.

// Held is the answer of Hold: each request's grant, and the hold their transaction takes.
type Held struct {
	// Grants holds each request's Ticket or refusal, as Reserve's answer does.
	Grants []Grant
	// ID names the hold, or is uuid.Nil when it holds nothing (no budgeted org had a request
	// granted): there is then nothing to take or give back.
	ID uuid.UUID
}

// holdRow is the hold function's answer for one budgeted org.
type holdRow struct {
	OrgID    int64  `bun:"org_id"`
	Granted  int    `bun:"granted"`
	Budget   int64  `bun:"budget"`
	Period   string `bun:"period"`
	Used     int64  `bun:"used"`
	Reserved int64  `bun:"reserved"`
}

// Hold admits the checked requests reqs as Reserve does, holding the reservations of the
// granted ones in a statement of its own, outside tx (which only serves the quota's count).
// The transaction that writes the granted requests' jobs must call Take before writing them,
// and when it fails to commit, GiveBack must be called (a hold neither taken nor given back
// is given back by a later hold of its org once it is older than any submit can live). The
// hold takes a connection of its own while the caller holds tx's, so the callers holding a
// transaction while they hold must be fewer than the pool's connections (the submit path's
// writers are a handful).
func (a *Admission) Hold(ctx context.Context, tx bun.Tx, reqs []*Request) (*Held, error) {
	if err := allChecked(reqs); err != nil {
		return nil, err
	}
	now := a.cfg.Now().UTC()
	grants, err := a.grant(ctx, tx, reqs, nil, now)
	if err != nil {
		return nil, err
	}
	h := &Held{Grants: grants}
	var orgs, tokens []int64
	for i, r := range reqs {
		if grants[i].Err == nil {
			orgs = append(orgs, r.OrgID)
			tokens = append(tokens, int64(r.estimate))
		}
	}
	if len(orgs) == 0 {
		return h, nil
	}
	id := uuid.New()
	var rows []holdRow
	if err := a.cfg.DB.NewRaw(holdSQL, id, pgdialect.Array(orgs), pgdialect.Array(tokens), now).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("hold the reservations of %d requests: %w", len(orgs), err)
	}
	for _, row := range rows {
		if row.Granted > 0 {
			h.ID = id
		}
		st, err := standingOf(budgetRow{OrgID: row.OrgID, Tokens: row.Budget, Period: row.Period, Used: row.Used, Reserved: row.Reserved}, now)
		if err != nil {
			return nil, err
		}
		seen := 0
		for i, r := range reqs {
			if r.OrgID != row.OrgID || grants[i].Err != nil {
				continue
			}
			if seen++; seen > row.Granted {
				h.Grants[i] = Grant{Err: st.refusal(now)}
			}
		}
	}
	return h, nil
}

// Take takes the hold h in tx with the writes pending on w (a Writes of tx), the jobs of h's
// grants, and sends those writes: their reservations are the hold's, and the jobs add none of
// their own. The take goes before the jobs' budget trigger runs, which reads which orgs'
// reservations are held: as a rule in the same statement, its main query, with the jobs'
// inserts in its WITH clause (an AFTER trigger of those runs at the statement's end); when the
// writes cannot go as one statement, in a statement of its own ahead of them. It fails,
// leaving tx unusable, when the hold is gone (given back already); the requests must then be
// admitted again with Reserve. With no hold it only sends the writes.
func (a *Admission) Take(ctx context.Context, tx bun.Tx, w *db.Writes, h *Held) error {
	if h.ID == uuid.Nil {
		return w.Send(ctx)
	}
	if !w.OneStatement() {
		if _, err := tx.NewRaw(takeSQL, h.ID).Exec(ctx); err != nil {
			return fmt.Errorf("take budget hold %s: %w", h.ID, err)
		}
		return w.Send(ctx)
	}
	var taken struct {
		Taken int `bun:"taken"`
	}
	if err := w.ScanWith(ctx, &taken, takeSQL, h.ID); err != nil {
		return fmt.Errorf("take budget hold %s with its jobs: %w", h.ID, err)
	}
	return nil
}

// GiveBack gives back the hold named id, whose transaction did not commit or may not have:
// a hold its committed transaction took is gone, and nothing is given back twice. uuid.Nil
// names no hold.
func (a *Admission) GiveBack(ctx context.Context, id uuid.UUID) error {
	if id == uuid.Nil {
		return nil
	}
	if _, err := a.cfg.DB.NewRaw(giveBackSQL, id).Exec(ctx); err != nil {
		return fmt.Errorf("give back budget hold %s: %w", id, err)
	}
	return nil
}
