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

func TestCheckWorkers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		workers       int
		sides, phases string
		ok            bool
	}{
		{defaultWorkers, allSides, allPhases, true},
		{2, allSides, "e2e", true},
		{2, "asterion", allPhases, true},
		{2, allSides, allPhases, false},
		{0, allSides, "e2e", false},
		{5001, allSides, "e2e", false},
	} {
		err := config{workers: tc.workers, sides: tc.sides, phases: tc.phases}.checkWorkers()
		if (err == nil) != tc.ok {
			t.Errorf("-workers %d -sides %q -phases %q: error %v, want ok=%v", tc.workers, tc.sides, tc.phases, err, tc.ok)
		}
	}
}
