package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// SimName is the Name of the simulated provider.
const SimName = "sim"

// SimModel is the model the simulated provider reports when the request
// names none.
const SimModel = "sim-1"

// SimLatencyEnv is the environment variable holding the simulated latency
// range, "min-max" as accepted by ParseLatencyRange.
const SimLatencyEnv = "ASTERION_SIM_LATENCY"

// The default simulated latency range: a random latency between these two.
const (
	DefaultSimMinLatency = 200 * time.Millisecond
	DefaultSimMaxLatency = 1500 * time.Millisecond
)

// maxSimEcho bounds the prompt echo in a simulated answer, in bytes.
const maxSimEcho = 120

// ErrSimulated is the cause wrapped by every failure a #sim:fail directive
// produces, so a test can tell a simulated failure from a real one.
var ErrSimulated = errors.New("simulated failure")

// SimConfig configures the simulated provider.
type SimConfig struct {
	// MinLatency and MaxLatency bound the random latency of a prompt
	// without a #sim:latency directive. Both zero means no latency; use
	// DefaultSimConfig for the contract's 200 ms – 1.5 s.
	MinLatency, MaxLatency time.Duration
	// Rand returns a number in [0, 1) that picks the latency within the
	// range. Optional, for tests; the default is math/rand/v2.Float64.
	Rand func() float64
	// Sleep waits d or until ctx is done, returning ctx's error in the
	// second case. Optional, for tests; the default uses a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// RPM, when positive, makes the sim behave like a rate-limited account:
	// it answers at most RPM calls in any sliding 60 s window (see simWindow).
	RPM int
	// Now is the clock of the RPM window. Optional, for tests.
	Now func() time.Time
}

// DefaultSimConfig returns the contract's default configuration: a random
// latency between 200 ms and 1.5 s.
func DefaultSimConfig() SimConfig {
	return SimConfig{MinLatency: DefaultSimMinLatency, MaxLatency: DefaultSimMaxLatency}
}

// SimRPMEnv is the environment variable holding the sim's requests per minute.
const SimRPMEnv = "ASTERION_SIM_RPM"

// SimConfigFromEnv returns the configuration selected by the
// ASTERION_SIM_LATENCY and ASTERION_SIM_RPM variables read through getenv
// (os.Getenv in production): DefaultSimConfig's latency when the first is
// empty, otherwise its range; no rate limit when the second is empty or 0.
func SimConfigFromEnv(getenv func(string) string) (SimConfig, error) {
	cfg := DefaultSimConfig()
	if v := strings.TrimSpace(getenv(SimLatencyEnv)); v != "" {
		lo, hi, err := ParseLatencyRange(v)
		if err != nil {
			return SimConfig{}, fmt.Errorf("%s: %w", SimLatencyEnv, err)
		}
		cfg.MinLatency, cfg.MaxLatency = lo, hi
	}
	if v := strings.TrimSpace(getenv(SimRPMEnv)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return SimConfig{}, fmt.Errorf("%s=%q: want a whole number of requests per minute (0: none)", SimRPMEnv, v)
		}
		cfg.RPM = n
	}
	return cfg, nil
}

// ParseLatencyRange parses a latency range "min-max" such as "200ms-1.5s"
// or "0-0". Each bound is a non-negative Go duration, or a plain integer
// meaning milliseconds; min must not exceed max. A single value without a
// dash, such as "300ms", means a fixed latency (min = max).
func ParseLatencyRange(s string) (min, max time.Duration, err error) {
	loText, hiText, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		hiText = loText
	}
	if min, err = parseLatencyBound(loText); err != nil {
		return 0, 0, fmt.Errorf("latency range %q: minimum: %w", s, err)
	}
	if max, err = parseLatencyBound(hiText); err != nil {
		return 0, 0, fmt.Errorf("latency range %q: maximum: %w", s, err)
	}
	if min > max {
		return 0, 0, fmt.Errorf("latency range %q: minimum %s exceeds maximum %s", s, min, max)
	}
	return min, max, nil
}

// parseLatencyBound parses one bound of a latency range.
func parseLatencyBound(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New(`missing value (want "min-max", e.g. "200ms-1.5s" or "0-0")`)
	}
	if isDigits(s) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
			return 0, fmt.Errorf("%q milliseconds is out of range", s)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a Go duration or whole milliseconds: %w", err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s is negative", d)
	}
	return d, nil
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Sim is the built-in simulated provider. It needs no account and no
// network, answers after a random latency, and obeys the "#sim:"
// directives of ParseDirectives. It is safe for concurrent use.
//
// A simulated failure (#sim:fail) waits the latency first, as a real
// provider takes time to fail, so a failing job is visibly running for a
// moment. A malformed directive fails at once with KindProvider4xx: it is
// the client's mistake and no attempt is made.
type Sim struct {
	cfg    SimConfig
	window *simWindow
}

// NewSim returns a simulated provider. A negative bound counts as zero and
// a MaxLatency below MinLatency as MinLatency; nil Rand and Sleep get their
// defaults.
func NewSim(cfg SimConfig) *Sim {
	cfg.MinLatency = max(cfg.MinLatency, 0)
	cfg.MaxLatency = max(cfg.MaxLatency, cfg.MinLatency)
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepContext
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sim{cfg: cfg}
	if cfg.RPM > 0 {
		s.window = newSimWindow(cfg.RPM, cfg.Now)
	}
	return s
}

// Name returns "sim".
func (s *Sim) Name() string { return SimName }

// DefaultModel is the model the sim reports when a prompt names none.
func (s *Sim) DefaultModel() string { return SimModel }

// Complete answers req after the simulated latency, or fails as its
// directives ask. The answer is deterministic: "Simulated answer to: "
// followed by a short echo of the prompt without its directives, or the N
// words of #sim:tokens=N, cut to at most Options.MaxTokens words. The directives are read
// from req.Text, the last user message of a conversation. With req.Output set, the answer is written one word
// at a time, evenly spread over the latency. The RequestID is
// "sim-<job id>-<attempt>". With an RPM limit, a call beyond it fails at once
// with rate_limit, and every answer and failure reports the window's figures
// in Limits.
func (s *Sim) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, contextError(ctx, "sim request", err)
	}
	d, err := ParseDirectives(req.Text)
	if err != nil {
		return Response{}, &Error{Kind: KindProvider4xx, Message: err.Error(), Err: err}
	}
	var limits Limits
	if s.window != nil {
		var refused *Error
		if limits, refused = s.window.take(); refused != nil {
			return Response{}, refused
		}
	}
	if d.Hang {
		<-ctx.Done()
		e := contextError(ctx, "sim hang", ctx.Err())
		e.Limits = limits
		return Response{}, e
	}
	latency := d.Latency
	if !d.HasLatency {
		latency = s.randomLatency()
	}
	attempt := max(req.Attempt, 1)
	fails := d.FailsAttempt(attempt)
	answer := capWords(simAnswer(d), req.Options.MaxTokens)
	if req.Output == nil || fails {
		if err := s.cfg.Sleep(ctx, latency); err != nil {
			e := contextError(ctx, "sim latency", err)
			e.Limits = limits
			return Response{}, e
		}
	} else if e := s.write(ctx, req, d, answer, latency); e != nil {
		e.Limits = limits
		return Response{}, e
	}
	if fails {
		e := simFailure(d, attempt)
		e.Limits = limits
		return Response{}, e
	}
	model := req.Options.Model
	if model == "" {
		model = SimModel
	}
	return Response{
		Text:             answer,
		RequestID:        "sim-" + req.JobID + "-" + strconv.Itoa(attempt),
		Provider:         SimName,
		Model:            model,
		PromptTokens:     simPromptTokens(req, d),
		CompletionTokens: len(strings.Fields(answer)),
		Limits:           limits,
	}, nil
}

// write passes answer to req.Output word by word, the i-th of n words after i/n of the
// latency. A cancellation or deadline on the way fails with what was written so far.
func (s *Sim) write(ctx context.Context, req Request, d Directives, answer string, latency time.Duration) *Error {
	words := strings.Fields(answer)
	step := latency / time.Duration(max(len(words), 1))
	var written strings.Builder
	for i, w := range words {
		if err := s.cfg.Sleep(ctx, step); err != nil {
			e := contextError(ctx, "sim answer", err)
			e.Partial = Partial{Text: written.String(), PromptTokens: simPromptTokens(req, d), CompletionTokens: i}
			return e
		}
		piece := w
		if i > 0 {
			piece = " " + w
		}
		written.WriteString(piece)
		req.emit(piece)
	}
	return nil
}

// capWords is the first max words of answer (all of it when max is not positive).
func capWords(answer string, max int) string {
	if max <= 0 {
		return answer
	}
	words := strings.Fields(answer)
	if len(words) <= max {
		return answer
	}
	return strings.Join(words[:max], " ")
}

// simPromptTokens is the sim's count of a prompt's input tokens: its words without directives,
// and those of every other message of its conversation (the directives are read from the last
// user message alone, which is req.Text).
func simPromptTokens(req Request, d Directives) int {
	n := len(strings.Fields(d.Prompt))
	if last := len(req.Messages) - 1; last >= 0 {
		for _, m := range req.Messages[:last] {
			n += len(strings.Fields(m.Content))
		}
	}
	return n
}

// simWords are the words a #sim:tokens answer cycles through.
var simWords = strings.Fields("the quick brown fox jumps over the lazy dog while seven patient " +
	"workers carry every prompt safely through the queue and back")

// simAnswer is the answer the directives ask for.
func simAnswer(d Directives) string {
	if d.Tokens == 0 {
		return "Simulated answer to: " + simEcho(d.Prompt)
	}
	var b strings.Builder
	for i := 0; i < d.Tokens; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(simWords[i%len(simWords)])
	}
	return b.String()
}

// randomLatency picks a latency in the configured range.
func (s *Sim) randomLatency() time.Duration {
	lo, hi := s.cfg.MinLatency, s.cfg.MaxLatency
	if hi <= lo {
		return lo
	}
	r := s.cfg.Rand()
	if r != r || r < 0 { // NaN or below range
		r = 0
	}
	if r >= 1 {
		return hi
	}
	return lo + time.Duration(r*float64(hi-lo))
}

// simFailure builds the *Error a #sim:fail directive asks for.
func simFailure(d Directives, attempt int) *Error {
	scope := "every attempt"
	if d.FailAttempts > 0 {
		scope = fmt.Sprintf("the first %d attempt(s)", d.FailAttempts)
	}
	e := &Error{
		Kind:    d.FailKind,
		Message: fmt.Sprintf("simulated %s failure on attempt %d (asked for %s)", d.FailKind, attempt, scope),
		Err:     ErrSimulated,
	}
	switch d.FailKind {
	case KindRateLimit:
		e.StatusCode = 429
		if d.HasRetryAfter {
			e.RetryAfter, e.HasRetryAfter = min(max(d.RetryAfter, 0), MaxSimRetryAfter), true
		}
	case KindProvider5xx:
		e.StatusCode = 503
	case KindProvider4xx:
		e.StatusCode = 400
	case KindAuth:
		e.StatusCode = 401
	}
	return e
}

// simEcho is the short echo of a prompt in a simulated answer.
func simEcho(prompt string) string {
	if prompt == "" {
		return "(empty prompt)"
	}
	return truncateUTF8(prompt, maxSimEcho)
}

// sleepContext waits d or until ctx is done, whichever comes first, and
// returns ctx's error in the second case.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
