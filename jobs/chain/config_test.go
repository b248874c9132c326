package chain_test

import (
	"strings"
	"testing"

	"asterion/jobs/chain"
	"asterion/jobs/jobstest"
)

// TestNewNeedsJobs: the chain owner runs its steps through prompt execution and registers with
// its registry, so a Config without Jobs is refused rather than half built.
func TestNewNeedsJobs(t *testing.T) {
	t.Parallel()
	if c, err := chain.New(chain.Config{}); err == nil || c != nil || !strings.Contains(err.Error(), "Config.Jobs is required") {
		t.Fatalf("New(Config{}) = %v, %v; want the missing Jobs named", c, err)
	}
}

// TestNewRegistersTheOwner: New registers flow.chain with the service's registry.
func TestNewRegistersTheOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	kinds := strings.Join(e.S.Registry().Kinds(), ",")
	if !strings.Contains(kinds, chain.Kind) {
		t.Fatalf("registered kinds %s, want %s among them", kinds, chain.Kind)
	}
}
