package jobs

import "github.com/uptrace/bun"

// admission holds the rule a claim must pass besides admission's budget check: the org's
// running cap.
type admission struct {
	cfg *Config
	db  *bun.DB
}
