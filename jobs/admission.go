package jobs

import "github.com/uptrace/bun"

// admission holds the rules a submit must pass besides its fields: the deployment's model
// list, the schedule's bounds, the org's budget and its queue quota.
type admission struct {
	cfg *Config
	db  *bun.DB
}
