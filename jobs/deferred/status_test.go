package deferred

import (
	"errors"
	"testing"
)

func TestStatusTerminal(t *testing.T) {
	cases := []struct {
		s            Status
		terminal     bool
		carriesError bool
	}{
		{StatusPending, false, false},
		{StatusRunning, false, false},
		{StatusCompleted, true, false},
		{StatusFailed, true, true},
		{StatusTimedOut, true, true},
		{StatusCancelled, true, false},
		{StatusExpired, true, true},
		{StatusUnknown, true, true},
		{Status("queued"), false, false},
		{Status(""), false, false},
	}
	for _, c := range cases {
		if got := c.s.Terminal(); got != c.terminal {
			t.Errorf("%q.Terminal() = %v, want %v", c.s, got, c.terminal)
		}
		if got := c.s.CarriesError(); got != c.carriesError {
			t.Errorf("%q.CarriesError() = %v, want %v", c.s, got, c.carriesError)
		}
	}
	if len(Statuses()) != 8 {
		t.Fatalf("Statuses() has %d entries, want 8", len(Statuses()))
	}
}

func TestParseStatus(t *testing.T) {
	for _, s := range Statuses() {
		got, err := ParseStatus(string(s))
		if err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	if StatusTimedOut != "timed-out" {
		t.Errorf("StatusTimedOut = %q, want timed-out", StatusTimedOut)
	}
	for _, bad := range []string{"", "Pending", "timed_out", "timedout", "queued", "succeeded", " running"} {
		if _, err := ParseStatus(bad); !errors.Is(err, ErrUnknownStatus) {
			t.Errorf("ParseStatus(%q) error = %v, want ErrUnknownStatus", bad, err)
		}
	}
}
