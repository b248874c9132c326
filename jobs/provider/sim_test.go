package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// sleepRecorder is an injectable Sleep that returns at once and remembers
// every duration it was asked to wait.
type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *sleepRecorder) Sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *sleepRecorder) Waits() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.waits...)
}

// newTestSim returns a sim whose latency is recorded, not waited.
func newTestSim() (*Sim, *sleepRecorder) {
	rec := &sleepRecorder{}
	return NewSim(SimConfig{MinLatency: time.Second, MaxLatency: 3 * time.Second, Rand: func() float64 { return 0.5 }, Sleep: rec.Sleep}), rec
}

func TestSimSuccess(t *testing.T) {
	t.Parallel()
	sim, rec := newTestSim()
	if sim.Name() != "sim" {
		t.Errorf("Name() = %q", sim.Name())
	}
	resp, err := sim.Complete(context.Background(), Request{PromptID: "p1", JobID: "j1", Attempt: 2, Text: "Tell me  a\njoke #sim:latency=5ms"})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := Response{
		Text:             "Simulated answer to: Tell me a joke",
		RequestID:        "sim-j1-2",
		Provider:         "sim",
		Model:            SimModel,
		PromptTokens:     4,
		CompletionTokens: 7,
	}
	if resp != want {
		t.Errorf("Complete =\n %+v, want\n %+v", resp, want)
	}
	again, _ := sim.Complete(context.Background(), Request{JobID: "j1", Attempt: 2, Text: "Tell me  a\njoke #sim:latency=5ms"})
	if again != resp {
		t.Errorf("answer is not deterministic: %+v vs %+v", again, resp)
	}

	resp, err = sim.Complete(context.Background(), Request{JobID: "j2", Text: "#sim:latency=0s", Options: Options{Model: "big"}})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Text != "Simulated answer to: (empty prompt)" || resp.Model != "big" || resp.RequestID != "sim-j2-1" {
		t.Errorf("empty prompt answer = %+v", resp)
	}

	long := strings.Repeat("word ", 100)
	resp, err = sim.Complete(context.Background(), Request{JobID: "j3", Attempt: 1, Text: long})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if !strings.HasSuffix(resp.Text, "…") || len(resp.Text) > len("Simulated answer to: ")+maxSimEcho {
		t.Errorf("long prompt echo not shortened: %q", resp.Text)
	}
	if got := rec.Waits(); len(got) != 4 || got[0] != 5*time.Millisecond || got[1] != 5*time.Millisecond || got[2] != 0 || got[3] != 2*time.Second {
		t.Errorf("waits = %v, want [5ms 5ms 0s 2s]", got)
	}
}

func TestSimFailFirstN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text     string
		attempt  int
		wantKind ErrorKind // "" means success
	}{
		{"q #sim:fail=provider_5xx:2", 1, KindProvider5xx},
		{"q #sim:fail=provider_5xx:2", 2, KindProvider5xx},
		{"q #sim:fail=provider_5xx:2", 3, ""},
		{"q #sim:fail=timeout:1", 0, KindTimeout}, // attempt 0 counts as 1
		{"q #sim:fail=timeout:1", 2, ""},
		{"q #sim:fail=auth", 1, KindAuth},
		{"q #sim:fail=auth", 9, KindAuth},
		{"q #sim:fail=parse", 3, KindParse},
		{"q #sim:fail=provider_4xx:3", 3, KindProvider4xx},
		{"q #sim:fail=rate_limit", 1, KindRateLimit},
		{"q #sim:fail=unknown:1", 1, KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.text+"/"+string(rune('0'+tt.attempt)), func(t *testing.T) {
			t.Parallel()
			sim, rec := newTestSim()
			resp, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: tt.attempt, Text: tt.text})
			if len(rec.Waits()) != 1 {
				t.Errorf("waited %v, want the latency once before answering or failing", rec.Waits())
			}
			if tt.wantKind == "" {
				if err != nil {
					t.Fatalf("attempt %d failed: %v", tt.attempt, err)
				}
				if resp.Text != "Simulated answer to: q" {
					t.Errorf("Text = %q", resp.Text)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("attempt %d: error %v is not an *Error", tt.attempt, err)
			}
			if pe.Kind != tt.wantKind || Classify(err).Kind != tt.wantKind {
				t.Errorf("Kind = %q, want %q", pe.Kind, tt.wantKind)
			}
			if !errors.Is(err, ErrSimulated) || IsCanceled(err) {
				t.Errorf("error %v: simulated %v, canceled %v", err, errors.Is(err, ErrSimulated), IsCanceled(err))
			}
			if resp != (Response{}) {
				t.Errorf("failure returned a response %+v", resp)
			}
		})
	}
}

func TestSimFailureStatusAndRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text          string
		wantStatus    int
		wantRetry     time.Duration
		wantHasRetry  bool
		wantRetryable bool
	}{
		{"#sim:fail=rate_limit #sim:retry_after=30", 429, 30 * time.Second, true, true},
		{"#sim:retry_after=0 #sim:fail=rate_limit:1", 429, 0, true, true},
		{"#sim:fail=rate_limit #sim:retry_after=9000000000", 429, MaxSimRetryAfter, true, true},
		{"#sim:fail=rate_limit", 429, 0, false, true},
		{"#sim:fail=provider_5xx #sim:retry_after=30", 503, 0, false, true},
		{"#sim:fail=provider_4xx", 400, 0, false, false},
		{"#sim:fail=auth", 401, 0, false, false},
		{"#sim:fail=timeout", 0, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			sim, _ := newTestSim()
			_, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: tt.text})
			pe := Classify(err)
			if pe == nil {
				t.Fatal("no error")
			}
			if pe.StatusCode != tt.wantStatus || pe.RetryAfter != tt.wantRetry || pe.HasRetryAfter != tt.wantHasRetry || pe.Retryable() != tt.wantRetryable {
				t.Errorf("got status %d retry %v/%v retryable %v; want %d %v/%v %v",
					pe.StatusCode, pe.RetryAfter, pe.HasRetryAfter, pe.Retryable(), tt.wantStatus, tt.wantRetry, tt.wantHasRetry, tt.wantRetryable)
			}
			if !strings.Contains(pe.Message, "simulated") {
				t.Errorf("Message %q does not say the failure is simulated", pe.Message)
			}
		})
	}
}

func TestSimBadDirective(t *testing.T) {
	t.Parallel()
	tests := []string{"#sim:fail=bogus", "#sim:latency=soon", "#sim:fail=timeout:0", "#sim:nap"}
	for _, text := range tests {
		t.Run(text, func(t *testing.T) {
			t.Parallel()
			sim, rec := newTestSim()
			_, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: "hello " + text})
			pe := Classify(err)
			if pe == nil || pe.Kind != KindProvider4xx || pe.Retryable() {
				t.Fatalf("error = %v, want a non-retryable provider_4xx", err)
			}
			if !strings.Contains(pe.Message, text) {
				t.Errorf("Message %q does not name the directive %q", pe.Message, text)
			}
			if len(rec.Waits()) != 0 {
				t.Errorf("a bad directive waited %v", rec.Waits())
			}
		})
	}
}

func TestSimLatencyDirectiveUsesSleep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want time.Duration
	}{
		{"#sim:latency=1234ms", 1234 * time.Millisecond},
		{"#sim:latency=0s x", 0},
		{"x #sim:latency=2h45m #sim:fail=parse", 2*time.Hour + 45*time.Minute},
		{"x #sim:latency=1ns", time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			sim, rec := newTestSim()
			_, _ = sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: tt.text})
			if got := rec.Waits(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("Sleep called with %v, want [%v]", got, tt.want)
			}
		})
	}
}

func TestSimRandomLatency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		min, max time.Duration
		r        float64
		want     time.Duration
	}{
		{"low end", 200 * time.Millisecond, 1500 * time.Millisecond, 0, 200 * time.Millisecond},
		{"middle", 200 * time.Millisecond, 1400 * time.Millisecond, 0.5, 800 * time.Millisecond},
		{"rand out of range high", 0, time.Second, 1.7, time.Second},
		{"rand out of range low", time.Second, 2 * time.Second, -3, time.Second},
		{"fixed", 300 * time.Millisecond, 300 * time.Millisecond, 0.9, 300 * time.Millisecond},
		{"zero", 0, 0, 0.9, 0},
		{"max below min is min", time.Second, time.Millisecond, 0.9, time.Second},
		{"negative bounds are zero", -time.Second, -time.Second, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &sleepRecorder{}
			sim := NewSim(SimConfig{MinLatency: tt.min, MaxLatency: tt.max, Rand: func() float64 { return tt.r }, Sleep: rec.Sleep})
			if _, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: "q"}); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got := rec.Waits(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("waited %v, want [%v]", got, tt.want)
			}
		})
	}

	t.Run("default rand stays in range", func(t *testing.T) {
		t.Parallel()
		rec := &sleepRecorder{}
		sim := NewSim(SimConfig{MinLatency: 200 * time.Millisecond, MaxLatency: 1500 * time.Millisecond, Sleep: rec.Sleep})
		for range 200 {
			if _, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: "q"}); err != nil {
				t.Fatalf("Complete: %v", err)
			}
		}
		for _, w := range rec.Waits() {
			if w < 200*time.Millisecond || w > 1500*time.Millisecond {
				t.Fatalf("latency %v outside [200ms, 1.5s]", w)
			}
		}
	})
}

func TestSimHangAndContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		text         string
		ctx          func() (context.Context, context.CancelFunc)
		wantKind     ErrorKind
		wantCanceled bool
	}{
		{
			name: "hang until cancel", text: "#sim:hang",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(30*time.Millisecond, cancel)
				return ctx, cancel
			},
			wantKind: KindUnknown, wantCanceled: true,
		},
		{
			name: "hang until deadline", text: "#sim:hang #sim:latency=1ms",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Millisecond)
			},
			wantKind: KindTimeout,
		},
		{
			name: "cancel during latency", text: "#sim:latency=1h",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(30*time.Millisecond, cancel)
				return ctx, cancel
			},
			wantKind: KindUnknown, wantCanceled: true,
		},
		{
			name: "deadline during latency", text: "#sim:latency=1h #sim:fail=auth",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Millisecond)
			},
			wantKind: KindTimeout,
		},
		{
			name: "already cancelled", text: "hello",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			wantKind: KindUnknown, wantCanceled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := tt.ctx()
			defer cancel()
			sim := NewSim(SimConfig{}) // real timer-based Sleep
			// A latency of an hour ends within the test only by the context.
			_, err := sim.Complete(ctx, Request{JobID: "j", Attempt: 1, Text: tt.text})
			if err == nil {
				t.Fatal("Complete succeeded, want a context error")
			}
			if got := Classify(err).Kind; got != tt.wantKind {
				t.Errorf("Classify kind = %q, want %q (err %v)", got, tt.wantKind, err)
			}
			if IsCanceled(err) != tt.wantCanceled {
				t.Errorf("IsCanceled = %v, want %v (err %v)", IsCanceled(err), tt.wantCanceled, err)
			}
			if tt.wantKind == KindTimeout && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("timeout does not wrap context.DeadlineExceeded: %v", err)
			}
		})
	}
}

func TestParseLatencyRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in       string
		min, max time.Duration
		wantErr  string
	}{
		{in: "200ms-1.5s", min: 200 * time.Millisecond, max: 1500 * time.Millisecond},
		{in: "0-0"},
		{in: "100-250", min: 100 * time.Millisecond, max: 250 * time.Millisecond},
		{in: " 1s - 2s ", min: time.Second, max: 2 * time.Second},
		{in: "50-1s", min: 50 * time.Millisecond, max: time.Second},
		{in: "300ms", min: 300 * time.Millisecond, max: 300 * time.Millisecond},
		{in: "1m-1m", min: time.Minute, max: time.Minute},
		{in: "", wantErr: "missing value"},
		{in: "-", wantErr: "missing value"},
		{in: "1s-", wantErr: "maximum"},
		{in: "-1s", wantErr: "minimum"},
		{in: "2s-1s", wantErr: "exceeds"},
		{in: "fast-slow", wantErr: "minimum"},
		{in: "1s-2s-3s", wantErr: "maximum"},
		{in: "1.5-2", wantErr: "minimum"},
		{in: "99999999999999999999-1", wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			lo, hi, err := ParseLatencyRange(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLatencyRange(%q) = %v, %v, %v; want error containing %q", tt.in, lo, hi, err, tt.wantErr)
				}
				return
			}
			if err != nil || lo != tt.min || hi != tt.max {
				t.Errorf("ParseLatencyRange(%q) = %v, %v, %v; want %v, %v", tt.in, lo, hi, err, tt.min, tt.max)
			}
		})
	}
}

func TestSimConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == SimLatencyEnv {
				return v
			}
			return ""
		}
	}
	cfg, err := SimConfigFromEnv(env(""))
	if err != nil || cfg.MinLatency != 200*time.Millisecond || cfg.MaxLatency != 1500*time.Millisecond {
		t.Errorf("unset: %+v, %v; want the 200ms-1.5s default", cfg, err)
	}
	if def := DefaultSimConfig(); cfg.MinLatency != def.MinLatency || cfg.MaxLatency != def.MaxLatency {
		t.Errorf("unset config %+v differs from DefaultSimConfig %+v", cfg, def)
	}
	cfg, err = SimConfigFromEnv(env("0-0"))
	if err != nil || cfg.MinLatency != 0 || cfg.MaxLatency != 0 {
		t.Errorf("0-0: %+v, %v", cfg, err)
	}
	if _, err = SimConfigFromEnv(env("2s-1s")); err == nil || !strings.Contains(err.Error(), SimLatencyEnv) {
		t.Errorf("bad range error %v does not name %s", err, SimLatencyEnv)
	}
}
