package intake

import (
	"fmt"
	"runtime"
	"time"
)

// DefaultYield is how long, at most, a worker delays a job start for the submits of its
// process, and how long after the last submit the workers' transactions stay in the lane: the
// value the command line configures unless told otherwise (see the README's benchmarks).
const DefaultYield = 100 * time.Millisecond

// Config configures the intake of one process. The zero value is a working intake with the
// lane off and group commit on.
type Config struct {
	// Yield is the longest a worker delays the start of a job while submits of this process
	// are in flight, and how long after the last submit its workers' transactions stay
	// narrowed; zero never delays or narrows (the lane is off).
	Yield time.Duration
	// LaneWidth is how many worker transactions the lane admits at once while submits flow
	// (default half the cores, at least one).
	LaneWidth int
	// GroupWriters bounds the shared submit transactions in flight at once (default 4).
	GroupWriters int
	// GroupMax bounds the submits in one shared transaction (default 32).
	GroupMax int
	// Solo turns group commit off: every submit has a transaction of its own.
	Solo bool
	// Now is the intake's clock (nil: time.Now). Tests that need the window after a submit
	// to have passed move it instead of sleeping through the window.
	Now func() time.Time
}

// validate fills in the defaults and rejects bad values.
func (c *Config) validate() error {
	switch {
	case c.Yield < 0:
		return fmt.Errorf("intake: Config.Yield %s is negative", c.Yield)
	case c.LaneWidth < 0:
		return fmt.Errorf("intake: Config.LaneWidth %d is negative", c.LaneWidth)
	case c.GroupWriters < 0:
		return fmt.Errorf("intake: Config.GroupWriters %d is negative", c.GroupWriters)
	case c.GroupMax < 0:
		return fmt.Errorf("intake: Config.GroupMax %d is negative", c.GroupMax)
	}
	if c.LaneWidth == 0 {
		c.LaneWidth = max(runtime.GOMAXPROCS(0)/2, 1)
	}
	if c.GroupWriters == 0 {
		c.GroupWriters = 4
	}
	if c.GroupMax == 0 {
		c.GroupMax = 32
	}
	return nil
}
