package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSimTokensStreamWordByWord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		text      string
		wantWords int
		wantText  string
		wantStep  time.Duration
	}{
		{name: "tokens directive", text: "write #sim:tokens=30 #sim:latency=3s", wantWords: 30, wantStep: 100 * time.Millisecond},
		{name: "default answer", text: "Tell me a joke #sim:latency=1s", wantWords: 7,
			wantText: "Simulated answer to: Tell me a joke", wantStep: time.Second / 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, rec := newTestSim()
			var got pieces
			resp, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: tt.text, Output: got.add})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			p := got.all()
			if len(p) != tt.wantWords || strings.Join(p, "") != resp.Text {
				t.Fatalf("%d pieces %q do not make the answer %q", len(p), p, resp.Text)
			}
			if tt.wantText != "" && resp.Text != tt.wantText {
				t.Errorf("answer %q, want %q", resp.Text, tt.wantText)
			}
			if n := len(strings.Fields(resp.Text)); n != tt.wantWords || resp.CompletionTokens != n {
				t.Errorf("answer has %d words, CompletionTokens %d, want %d", n, resp.CompletionTokens, tt.wantWords)
			}
			for i, piece := range p {
				if (i == 0) == strings.HasPrefix(piece, " ") || strings.Count(piece, " ") > 1 {
					t.Errorf("piece %d %q is not one word", i, piece)
				}
			}
			waits := rec.Waits()
			if len(waits) != tt.wantWords {
				t.Fatalf("%d waits, want one before each word", len(waits))
			}
			for _, w := range waits {
				if w != tt.wantStep {
					t.Fatalf("waits %v, want each %v", waits, tt.wantStep)
				}
			}
		})
	}
}

func TestSimTokensWithoutOutputIsOneWait(t *testing.T) {
	t.Parallel()
	sim, rec := newTestSim()
	resp, err := sim.Complete(context.Background(), Request{Text: "#sim:tokens=5 #sim:latency=2s"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "the quick brown fox jumps" || resp.PromptTokens != 0 || resp.CompletionTokens != 5 {
		t.Errorf("Complete = %+v", resp)
	}
	if w := rec.Waits(); len(w) != 1 || w[0] != 2*time.Second {
		t.Errorf("waits %v, want one of 2s", w)
	}
}

// TestSimCancelMidAnswerKeepsPartial cancels after the third word.
func TestSimCancelMidAnswerKeepsPartial(t *testing.T) {
	t.Parallel()
	sim, _ := newTestSim()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got pieces
	out := func(s string) {
		got.add(s)
		if len(got.all()) == 3 {
			cancel()
		}
	}
	_, err := sim.Complete(ctx, Request{Text: "four words of prompt #sim:tokens=10", Output: out})
	if !IsCanceled(err) {
		t.Fatalf("Complete = %v, want a cancellation", err)
	}
	want := Partial{Text: "the quick brown", PromptTokens: 4, CompletionTokens: 3}
	if pe := Classify(err); pe.Partial != want {
		t.Errorf("Partial = %+v, want %+v", pe.Partial, want)
	}
}

func TestSimFailingAttemptWritesNothing(t *testing.T) {
	t.Parallel()
	sim, _ := newTestSim()
	var got pieces
	_, err := sim.Complete(context.Background(), Request{Attempt: 1, Text: "#sim:tokens=4 #sim:fail=provider_5xx:1", Output: got.add})
	if pe := Classify(err); pe == nil || pe.Kind != KindProvider5xx {
		t.Fatalf("Complete = %v", err)
	}
	if p := got.all(); len(p) != 0 {
		t.Errorf("a failing attempt wrote %q", p)
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestSimRPMWindow(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	sim := NewSim(SimConfig{RPM: 3, Now: clock.Now})
	call := func() (Response, *Error) {
		t.Helper()
		resp, err := sim.Complete(context.Background(), Request{Text: "q"})
		return resp, Classify(err)
	}
	for i, at := range []time.Duration{0, 10 * time.Second, 10 * time.Second} {
		clock.Advance(at)
		resp, e := call()
		if e != nil {
			t.Fatalf("call %d: %v", i+1, e)
		}
		if l := resp.Limits; !l.HasRemainingRequests || l.RemainingRequests != 2-i || l.LimitRequests != 3 {
			t.Errorf("call %d: Limits %+v, want %d remaining of 3", i+1, l, 2-i)
		}
	}
	// 20 s after the first call: the fourth waits 40 s for the first to leave the window.
	_, e := call()
	if e == nil || e.Kind != KindRateLimit || !e.HasRetryAfter || e.RetryAfter != 40*time.Second {
		t.Fatalf("fourth call: %+v, want rate_limit with Retry-After 40s", e)
	}
	if !errors.Is(e, ErrSimulated) || e.Limits.RemainingRequests != 0 || e.Limits.ResetRequests != 40*time.Second {
		t.Errorf("fourth call: %+v", e)
	}
	clock.Advance(40*time.Second - time.Millisecond)
	if _, e := call(); e == nil || e.RetryAfter != time.Second {
		t.Fatalf("just before the first call leaves: %+v, want Retry-After 1s", e)
	}
	clock.Advance(time.Millisecond)
	if resp, e := call(); e != nil || resp.Limits.RemainingRequests != 0 {
		t.Fatalf("once the first call left the window: %+v %v", resp.Limits, e)
	}
}

func TestSimConfigFromEnvRPM(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := SimConfigFromEnv(env(map[string]string{SimRPMEnv: "60"}))
	if err != nil || cfg.RPM != 60 || cfg.MinLatency != DefaultSimMinLatency {
		t.Errorf("RPM 60: %+v %v", cfg, err)
	}
	for _, bad := range []string{"-1", "lots", "1.5"} {
		if _, err := SimConfigFromEnv(env(map[string]string{SimRPMEnv: bad})); err == nil || !strings.Contains(err.Error(), SimRPMEnv) {
			t.Errorf("RPM %q: err %v", bad, err)
		}
	}
}

func TestParseDirectivesTokens(t *testing.T) {
	t.Parallel()
	d, err := ParseDirectives("say #sim:tokens=40 more")
	if err != nil || d.Tokens != 40 || d.Prompt != "say more" || d.String() != "#sim:tokens=40" {
		t.Errorf("ParseDirectives = %+v %v", d, err)
	}
	for _, bad := range []string{"#sim:tokens", "#sim:tokens=0", "#sim:tokens=-2", "#sim:tokens=x", "#sim:tokens=100001"} {
		if _, err := ParseDirectives(bad); err == nil {
			t.Errorf("ParseDirectives(%q) accepted", bad)
		}
	}
}
