package jobs_test

import (
	"errors"
	"fmt"
	"testing"

	"asterion/jobs"
)

func constRand(r float64) func() float64 { return func() float64 { return r } }

func TestRiverPriorityBands(t *testing.T) {
	t.Parallel()
	want := map[int]int{0: 1, 10: 1, 11: 2, 40: 2, 41: 3, 59: 3, 60: 4, 100: 4, 5: 1, 25: 2, 50: 3, 90: 4}
	for p, w := range want {
		if got := jobs.RiverPriority(p); got != w {
			t.Errorf("RiverPriority(%d) = %d, want %d", p, got, w)
		}
	}
	// Monotone over the whole range and always a River priority.
	prev := 1
	for p := 0; p <= 100; p++ {
		got := jobs.RiverPriority(p)
		if got < prev || got < 1 || got > 4 {
			t.Fatalf("RiverPriority(%d) = %d after %d", p, got, prev)
		}
		prev = got
	}
}

// TestCanTransitionTable checks every pair of the six states against the table of legal changes.
func TestCanTransitionTable(t *testing.T) {
	t.Parallel()
	all := []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled, jobs.StateSuperseded}
	legal := map[[2]jobs.State]bool{
		{jobs.StateQueued, jobs.StateRunning}:       true,
		{jobs.StateQueued, jobs.StateCancelled}:     true,
		{jobs.StateRunning, jobs.StateSucceeded}:    true,
		{jobs.StateRunning, jobs.StateQueued}:       true,
		{jobs.StateRunning, jobs.StateFailed}:       true,
		{jobs.StateRunning, jobs.StateCancelled}:    true,
		{jobs.StateSucceeded, jobs.StateSuperseded}: true,
		{jobs.StateFailed, jobs.StateSuperseded}:    true,
		{jobs.StateCancelled, jobs.StateSuperseded}: true,
	}
	n := 0
	for _, from := range all {
		for _, to := range all {
			n++
			want := legal[[2]jobs.State{from, to}]
			if got := jobs.CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
		// Unknown states never transition.
		if jobs.CanTransition(from, "paused") || jobs.CanTransition("paused", from) {
			t.Errorf("a transition with an unknown state is allowed for %s", from)
		}
	}
	if n != 36 {
		t.Fatalf("checked %d pairs, want 36", n)
	}
	for _, s := range all {
		got, err := jobs.ParseState(string(s))
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
		wantTerminal := s != jobs.StateQueued && s != jobs.StateRunning
		if s.Terminal() != wantTerminal {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		// A terminal state changes only into superseded.
		if s.Terminal() {
			for _, to := range all {
				if jobs.CanTransition(s, to) && to != jobs.StateSuperseded {
					t.Errorf("terminal %s may become %s", s, to)
				}
			}
		}
	}
	for _, bad := range []string{"", "QUEUED", "done", "queued "} {
		if _, err := jobs.ParseState(bad); err == nil {
			t.Errorf("ParseState(%q) accepted", bad)
		}
	}
}

func TestValidationErrorUnwrap(t *testing.T) {
	t.Parallel()
	var err error = &jobs.ValidationError{Fields: map[string]string{"prompt": "x"}}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), jobs.ErrInvalid) {
		t.Fatal("a ValidationError does not match ErrInvalid")
	}
}
