package main

import "testing"

func TestCheckNoWorker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		noWorker bool
		phases   string
		ok       bool
	}{
		{false, allPhases, true},
		{true, "open", true},
		{true, "closed50, closed200,open", true},
		{true, allPhases, false},
		{true, "open,e2e", false},
		{true, "pickup", false},
	} {
		err := config{noWorker: tc.noWorker, phases: tc.phases}.checkNoWorker()
		if (err == nil) != tc.ok {
			t.Errorf("-no-worker=%v -phases %q: error %v, want ok=%v", tc.noWorker, tc.phases, err, tc.ok)
		}
	}
}
