package admit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/db/dbtest"
	"asterion/jobs/admit"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	d := &bun.DB{}
	for name, cfg := range map[string]admit.Config{
		"no database":      {Models: []string{"m"}},
		"no models":        {DB: d},
		"a blank model":    {DB: d, Models: []string{" m"}},
		"a model twice":    {DB: d, Models: []string{"m", "m"}},
		"a control char":   {DB: d, Models: []string{"m\x01"}},
		"a negative quota": {DB: d, Models: []string{"m"}, OrgMaxQueued: -1},
		"a negative rate":  {DB: d, Models: []string{"m"}, SubmitRate: -1},
		"a negative TTL":   {DB: d, Models: []string{"m"}, MeanOutputTTL: -time.Second},
		"a too long model": {DB: d, Models: []string{strings.Repeat("m", 201)}},
	} {
		if _, err := admit.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := admit.New(admit.Config{DB: d, Models: []string{"small", "large"}}); err != nil {
		t.Errorf("a good config: %v", err)
	}
}

func TestFields(t *testing.T) {
	t.Parallel()
	a, err := admit.New(admit.Config{DB: &bun.DB{}, Models: []string{"small", "large"}})
	if err != nil {
		t.Fatal(err)
	}
	far := time.Now().Add(31 * 24 * time.Hour)
	past := time.Now().Add(-2 * time.Minute)
	for name, tc := range map[string]struct {
		req   admit.Request
		field string
	}{
		"blank":        {admit.Request{Text: "  \n"}, "prompt"},
		"NUL":          {admit.Request{Text: "a\x00b"}, "prompt"},
		"too long":     {admit.Request{Text: strings.Repeat("x", admit.MaxPromptChars+1)}, "prompt"},
		"bad UTF-8":    {admit.Request{Text: "\xff"}, "prompt"},
		"a step":       {admit.Request{Text: "", TextField: "steps[2].prompt"}, "steps[2].prompt"},
		"unlisted":     {admit.Request{Text: "ok", Model: "huge"}, "options.model"},
		"too far":      {admit.Request{Text: "ok", ScheduledFor: &far}, "scheduled_for"},
		"too long ago": {admit.Request{Text: "ok", ScheduledFor: &past}, "scheduled_for"},
		"max tokens":   {admit.Request{Text: "ok", MaxTokens: -1}, "options.max_tokens"},
	} {
		if got := a.Fields(&tc.req); got[tc.field] == "" || len(got) != 1 {
			t.Errorf("%s: %v, want one message on %s", name, got, tc.field)
		}
	}
	if got := a.Fields(&admit.Request{Text: "fine", Model: "large"}); len(got) != 0 {
		t.Errorf("a good request: %v", got)
	}
}

// TestReserve: within one call, an org's queue quota and budget count the requests admitted
// before; a request that did not pass Check is refused outright.
func TestReserve(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	var org int64
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES ('reserve') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	a, err := admit.New(admit.Config{DB: d.Bun, Models: []string{"m"}, OrgMaxQueued: 3})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(maxTokens int) *admit.Request {
		r := &admit.Request{OrgID: org, UserID: 1, Text: "four", MaxTokens: maxTokens}
		if err := a.Check(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	reserve := func(reqs ...*admit.Request) []admit.Grant {
		var out []admit.Grant
		err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var err error
			out, err = a.Reserve(ctx, tx, reqs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Without a budget: the quota of three holds within the call.
	g := reserve(ask(9), ask(9), ask(9), ask(9))
	for i, want := range []bool{true, true, true, false} {
		if g[i].Ticket.Valid() != want {
			t.Errorf("request %d admitted %v, want %v (%v)", i, g[i].Ticket.Valid(), want, g[i].Err)
		}
	}
	if !errors.Is(g[3].Err, admit.ErrQuotaExceeded) || g[0].Ticket.Tokens() != 1+9 {
		t.Errorf("grants %+v", g)
	}
	// With a budget of 15: the first (10) is below it, the second sees 10 reserved and is
	// admitted too (10 < 15), the third sees 20 and is refused.
	setDayBudget(t, d, org, 15)
	g = reserve(ask(9), ask(9), ask(9))
	if !g[0].Ticket.Valid() || !g[1].Ticket.Valid() || !errors.Is(g[2].Err, admit.ErrBudgetExhausted) {
		t.Errorf("grants under the budget %+v", g)
	}
	var be *admit.BudgetExhaustedError
	if errors.As(g[2].Err, &be) && (be.Reserved != 20 || be.Kind() != "budget-exhausted" || be.RetryAfter() < 1) {
		t.Errorf("refusal %+v", be)
	}
	err = d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		_, err := a.Reserve(ctx, tx, []*admit.Request{{OrgID: org, Text: "unchecked"}})
		return err
	})
	if err == nil {
		t.Error("an unchecked request was reserved")
	}
}

// TestHold: a hold decides as Reserve does (the first two of three requests of 10 tokens fit a
// budget of 15), holds what it granted in the budget's counter and a hold row, and a hold given
// back returns its tokens once, however often it is given back.
func TestHold(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	org := newOrg(t, d, "hold")
	setDayBudget(t, d, org, 15)
	a, err := admit.New(admit.Config{DB: d.Bun, Models: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*admit.Request
	for range 3 {
		r := &admit.Request{OrgID: org, UserID: 1, Text: "four", MaxTokens: 9}
		if err := a.Check(ctx, r); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	var h *admit.Held
	err = d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		h, err = a.Hold(ctx, tx, reqs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var be *admit.BudgetExhaustedError
	if !h.Grants[0].Ticket.Valid() || !h.Grants[1].Ticket.Valid() || !errors.As(h.Grants[2].Err, &be) || be.Reserved != 20 || be.Budget != 15 {
		t.Fatalf("grants %+v (refusal %+v), want two tickets and a refusal seeing 20 reserved of 15", h.Grants, be)
	}
	if counter, held := budgetStanding(t, d, org); counter != 20 || held != 20 {
		t.Errorf("after the hold the counter holds %d and the hold %d, want 20 and 20", counter, held)
	}
	for range 2 {
		if err := a.GiveBack(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
		if counter, held := budgetStanding(t, d, org); counter != 0 || held != 0 {
			t.Errorf("after giving the hold back the counter holds %d and the hold %d, want none", counter, held)
		}
	}
}
