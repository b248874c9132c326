package governor_test

import (
	"context"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/jobs/governor"
	"asterion/jobs/provider"
)

// state reads one model's state.
func state(t *testing.T, g *governor.Governor, model string) governor.State {
	t.Helper()
	states, err := g.States(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.Model == model {
			return s
		}
	}
	t.Fatalf("no state of model %s in %+v", model, states)
	return governor.State{}
}

// TestOneAnswerPausesAtMostMaxPause: whatever a provider answer asks (a Retry-After of
// centuries, the reset of an exhausted limit as long, a token debt of millions of tokens),
// every process keeps off the model for at most MaxPause, and a pause recorded before the
// bound is brought within it by the next answer.
func TestOneAnswerPausesAtMostMaxPause(t *testing.T) {
	t.Parallel()
	const maxPause = 90 * time.Second
	centuries := 9000000000 * time.Second
	tests := []struct {
		name string
		o    governor.Observation
		cfg  governor.Config
	}{
		{"429 Retry-After", governor.Observation{RateLimited: true, RetryAfter: centuries, HasRetryAfter: true}, governor.Config{}},
		{"exhausted requests", governor.Observation{Limits: provider.Limits{HasRemainingRequests: true, ResetRequests: centuries}}, governor.Config{}},
		{"exhausted tokens", governor.Observation{Limits: provider.Limits{HasRemainingTokens: true, ResetTokens: centuries}}, governor.Config{}},
		{"token debt", governor.Observation{ReservedTokens: 1, UsedTokens: 1 << 30}, governor.Config{TPM: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := dbtest.New(t)
			ctx := context.Background()
			cfg := tt.cfg
			cfg.MaxPause = maxPause
			g := newGovernor(t, d, cfg)
			if gr := reserve(t, g, "m", 1); !gr.Granted {
				t.Fatalf("first reservation: %+v", gr)
			}
			if err := g.Observe(ctx, "m", tt.o); err != nil {
				t.Fatal(err)
			}
			st := state(t, g, "m")
			if st.PausedUntil != nil && st.PausedUntil.Sub(st.Now) > maxPause {
				t.Errorf("paused for %v more, want at most %v", st.PausedUntil.Sub(st.Now), maxPause)
			}
			gr := reserve(t, g, "m", 1)
			if gr.Granted || gr.Paused {
				t.Fatalf("reservation after the answer: %+v, want a wait", gr)
			}
			if gr.Wait > maxPause || gr.Wait <= 0 {
				t.Errorf("told to wait %v, want within (0, %v]", gr.Wait, maxPause)
			}
		})
	}
	t.Run("a pause recorded before the bound", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		ctx := context.Background()
		g := newGovernor(t, d, governor.Config{MaxPause: maxPause})
		if _, err := d.Bun.ExecContext(ctx, "INSERT INTO sa_governor (model, paused_until) VALUES ('m', now() + interval '300 years')"); err != nil {
			t.Fatal(err)
		}
		if err := g.Observe(ctx, "m", governor.Observation{RateLimited: true, RetryAfter: time.Second, HasRetryAfter: true}); err != nil {
			t.Fatal(err)
		}
		if st := state(t, g, "m"); st.PausedUntil.Sub(st.Now) > maxPause {
			t.Errorf("paused for %v more, want at most %v", st.PausedUntil.Sub(st.Now), maxPause)
		}
	})
}

// TestResumeEndsEveryPause: a resume ends a provider's pause and an operator's alike, with the
// token debt an answer left, and forgets who paused.
func TestResumeEndsEveryPause(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	g, other := newGovernor(t, d, governor.Config{TPM: 1000}), newGovernor(t, d, governor.Config{TPM: 1000})
	if gr := reserve(t, g, "m", 1); !gr.Granted {
		t.Fatalf("first reservation: %+v", gr)
	}
	if err := g.Observe(ctx, "m", governor.Observation{RateLimited: true, RetryAfter: time.Minute, HasRetryAfter: true,
		ReservedTokens: 1, UsedTokens: 100000}); err != nil {
		t.Fatal(err)
	}
	if err := g.Pause(ctx, "m", governor.Pauser{Role: governor.RoleAdmin, Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	if st := state(t, g, "m"); !st.ProviderPaused() || !st.OperatorPaused || st.PausedActor != "cli" {
		t.Fatalf("before the resume: %+v", st)
	}
	if err := other.Resume(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	st := state(t, g, "m")
	if st.ProviderPaused() || st.OperatorPaused || st.PausedRole != "" || st.PausedActor != "" || st.PausedBy != nil || st.PauseRole() != "" {
		t.Errorf("after the resume: %+v", st)
	}
	if gr := reserve(t, g, "m", 1); !gr.Granted || gr.Wait > 0 {
		t.Errorf("reservation after the resume: %+v, want granted at once", gr)
	}
	if err := g.Pause(ctx, "m", governor.Pauser{Role: "member"}); err == nil {
		t.Error("a pause recorded a member's role")
	}
}
