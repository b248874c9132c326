package usage_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/usage"
)

func TestParsePrices(t *testing.T) {
	t.Parallel()
	p, err := usage.ParsePrices([]byte(`{"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}, "free": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Cost("gpt-4o", 1_000_000, 500_000); math.Abs(got-7.5) > 1e-9 {
		t.Errorf("Cost = %v, want 7.5", got)
	}
	if got := p.Cost("unknown", 1000, 1000); got != 0 {
		t.Errorf("an unknown model costs %v", got)
	}
	for _, bad := range []string{
		`{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}`,
		`{"m": {"input_per_mtok": 1, "output": 1}}`,
		`{"m": 3}`,
		`[]`,
		`{} {}`,
	} {
		if _, err := usage.ParsePrices([]byte(bad)); err == nil {
			t.Errorf("ParsePrices(%s) accepted", bad)
		}
	}
	if p, err := usage.LoadPrices(""); err != nil || len(p) != 0 {
		t.Errorf("no file: %v %v", p, err)
	}
	if _, err := usage.LoadPrices("/nonexistent/prices.json"); err == nil || !strings.Contains(err.Error(), usage.PricesEnv) {
		t.Errorf("missing file: %v", err)
	}
}

func TestPeriodBounds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 31, 23, 59, 0, 0, time.FixedZone("x", -3*3600)) // 2027-01-01 02:59 UTC
	tests := []struct {
		p          usage.Period
		start, end time.Time
	}{
		{usage.Day, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)},
		{usage.Month, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		s, e := tt.p.Bounds(at)
		if !s.Equal(tt.start) || !e.Equal(tt.end) {
			t.Errorf("%s bounds %v–%v, want %v–%v", tt.p, s, e, tt.start, tt.end)
		}
	}
	if _, err := usage.ParsePeriod("week"); err == nil {
		t.Error("week accepted")
	}
	st := usage.Status{Resets: at.Add(90 * time.Second)}
	if got := st.RetryAfter(at.Add(500 * time.Millisecond)); got != 90 {
		t.Errorf("RetryAfter = %d, want 90 (rounded up)", got)
	}
}

func newOrg(t *testing.T, d *dbtest.DB) int64 {
	t.Helper()
	o := &db.Org{Name: "org-" + uuid.NewString()[:8]}
	if _, err := d.Bun.NewInsert().Model(o).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func TestMeterRecordsAndBudgets(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	prices := usage.Prices{"gpt": {InputPerMTok: 1, OutputPerMTok: 2}}
	m, err := usage.New(usage.Config{DB: d.Bun, Prices: prices, StatusTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	org, other := newOrg(t, d), newOrg(t, d)
	job := uuid.New()
	started := time.Now().Add(-time.Second)
	record := func(orgID int64, job uuid.UUID, attempt int, model string, in, out int, kind string) {
		t.Helper()
		if _, err := m.Record(ctx, d.Bun, usage.AttemptUsage{JobID: job, Attempt: attempt, OrgID: orgID, Model: model,
			StartedAt: started, ErrorKind: kind, InputTokens: in, OutputTokens: out}); err != nil {
			t.Fatal(err)
		}
	}
	record(org, job, 1, "gpt", 100, 40, "timeout")
	record(org, job, 2, "gpt", 100, 60, "")
	record(org, job, 2, "gpt", 100, 60, "") // recorded twice: counted once
	record(org, uuid.New(), 1, "sim-1", 10, 10, "")
	record(other, uuid.New(), 1, "gpt", 1000, 1000, "")

	rows, total, err := m.JobAttempts(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ErrorKind == nil || *rows[0].ErrorKind != "timeout" || rows[1].ErrorKind != nil {
		t.Fatalf("attempts %+v", rows)
	}
	want := usage.Total{InputTokens: 200, OutputTokens: 100, CostUSD: (200*1 + 100*2) / 1e6}
	if total.InputTokens != want.InputTokens || total.OutputTokens != want.OutputTokens || math.Abs(total.CostUSD-want.CostUSD) > 1e-12 {
		t.Errorf("job total %+v, want %+v", total, want)
	}

	st, err := m.Status(ctx, org)
	if err != nil || st.Exhausted() || st.Budget.Tokens != 0 {
		t.Fatalf("no budget: %+v %v", st, err)
	}
	if err := m.SetBudget(ctx, org, usage.Budget{Tokens: 320, Period: usage.Day}); err != nil {
		t.Fatal(err)
	}
	st, err = m.Status(ctx, org)
	if err != nil || st.Used != 320 || !st.Exhausted() {
		t.Errorf("budget of 320 after 320 tokens: %+v %v", st, err)
	}
	if err := m.SetBudget(ctx, org, usage.Budget{Tokens: 1000, Period: usage.Month}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(ctx, org); st.Exhausted() || st.Used != 320 || st.Budget.Period != usage.Month {
		t.Errorf("monthly budget of 1000: %+v", st)
	}
	if err := m.SetBudget(ctx, org, usage.Budget{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(ctx, org); st.Budget.Tokens != 0 {
		t.Errorf("cleared budget: %+v", st)
	}

	win, err := m.Window(ctx, time.Now().Add(-time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if u := win[org]; u.InputTokens != 210 || u.OutputTokens != 110 || len(u.Models) != 2 || u.Models["sim-1"].InputTokens != 10 {
		t.Errorf("window of org %d: %+v", org, u)
	}
	only, err := m.Window(ctx, time.Now().Add(-time.Hour), other)
	if err != nil || len(only) != 1 || only[other].InputTokens != 1000 {
		t.Errorf("window of one org: %+v %v", only, err)
	}
}

func TestMeterCachesStatus(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	m, err := usage.New(usage.Config{DB: d.Bun, Now: clock, StatusTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	org := newOrg(t, d)
	if err := m.SetBudget(ctx, org, usage.Budget{Tokens: 5, Period: usage.Day}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(ctx, org); st.Exhausted() {
		t.Fatal("exhausted before any use")
	}
	if _, err := m.Record(ctx, d.Bun, usage.AttemptUsage{JobID: uuid.New(), Attempt: 1, OrgID: org, Model: "m",
		StartedAt: now, InputTokens: 5}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(ctx, org); st.Exhausted() {
		t.Error("a cached status was read again before its TTL")
	}
	now = now.Add(time.Minute)
	if st, _ := m.Status(ctx, org); !st.Exhausted() {
		t.Error("status not read again after its TTL")
	}
	if _, err := usage.New(usage.Config{DB: d.Bun, StatusTTL: 2 * time.Minute}); err == nil {
		t.Error("a TTL over a minute accepted")
	}
}
