package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/registry"
)

// Step is one step of a chain request.
type Step struct {
	Prompt          string
	IncludePrevious bool
}

// Request asks for a chain of prompts to be run.
type Request struct {
	Viewer registry.Viewer
	Steps  []Step
	// Mode is ModeSuspend (default when empty) or ModeReject.
	Mode     string
	Priority *int
	// TTLSeconds is the lifetime the caller asks for; the host policy clamps it. When nil the
	// chain asks for one policy default TTL per step (clamped too).
	TTLSeconds     *int
	IdempotencyKey string
}

// validate checks every rule and normalises defaults; field names follow the JSON body.
func (r *Request) validate() error {
	fields := map[string]string{}
	switch n := len(r.Steps); {
	case n == 0:
		fields["steps"] = fmt.Sprintf("must hold 1..%d steps", MaxSteps)
	case n > MaxSteps:
		fields["steps"] = fmt.Sprintf("must hold 1..%d steps, got %d", MaxSteps, n)
	}
	for i := range r.Steps {
		st := &r.Steps[i]
		if msg := admit.TextProblem(st.Prompt); msg != "" {
			fields[fmt.Sprintf("steps[%d].prompt", i)] = msg
		}
		st.Prompt = strings.TrimSpace(st.Prompt)
	}
	if len(r.Steps) > 0 && r.Steps[0].IncludePrevious {
		fields["steps[0].include_previous"] = "the first step has no previous response"
	}
	switch r.Mode {
	case "":
		r.Mode = ModeSuspend
	case ModeSuspend, ModeReject:
	default:
		fields["deferred_response_mode"] = `must be "suspend" or "reject-as-failure"`
	}
	if r.Priority == nil {
		p := jobs.DefaultPriority
		r.Priority = &p
	} else if *r.Priority < 0 || *r.Priority > 100 {
		fields["priority"] = "must be between 0 and 100"
	}
	if r.TTLSeconds != nil && (*r.TTLSeconds < 1 || *r.TTLSeconds > maxTTLSeconds) {
		fields["ttl_seconds"] = fmt.Sprintf("must be between 1 and %d", maxTTLSeconds)
	}
	if r.IdempotencyKey != "" {
		if msg := jobs.CheckIdempotencyKey(r.IdempotencyKey); msg != "" {
			fields["Idempotency-Key"] = msg
		}
	}
	if len(fields) > 0 {
		return &jobs.ValidationError{Fields: fields}
	}
	return nil
}

// requestHash fingerprints the normalised request for Idempotency-Key comparison.
func (r *Request) requestHash() string {
	type step struct {
		Prompt          string `json:"prompt"`
		IncludePrevious bool   `json:"include_previous"`
	}
	steps := make([]step, len(r.Steps))
	for i, s := range r.Steps {
		steps[i] = step(s)
	}
	b, _ := json.Marshal(struct {
		Steps    []step `json:"steps"`
		Mode     string `json:"mode"`
		Priority int    `json:"priority"`
		TTL      *int   `json:"ttl_seconds"`
	}{steps, r.Mode, *r.Priority, r.TTLSeconds})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
