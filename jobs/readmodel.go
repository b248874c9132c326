package jobs

import (
	"github.com/uptrace/bun"

	"asterion/jobs/registry"
	"asterion/jobs/usage"
)

// Reads is the read side of prompt execution and the registry: lists with their filters and
// cursors, counts, details, the dashboard's series and liveness, the metrics, each limited to
// what a Viewer may see. It writes nothing. The Service embeds it, so the server reads through
// the service it already holds.
type Reads struct {
	db  *bun.DB
	reg *registry.Registry
	// meter reads the usage of jobs; nil when none is configured.
	meter *usage.Meter
	// eta estimates when queued jobs start and running ones end.
	eta *Estimator
}

// ETAs returns the estimator of when jobs start and end.
func (s *Reads) ETAs() *Estimator { return s.eta }
