package handlers

import (
	"context"
	"strings"
	"time"

	"asterion/identity"
)

// dashPageSize is how many rows a list page shows.
const dashPageSize = 50

// dashRanges are the time ranges of the list filters.
var dashRanges = map[string]time.Duration{
	"15m": 15 * time.Minute, "1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour,
}

// dashParseTime reads a datetime-local value (taken as UTC) or an RFC 3339 time.
func dashParseTime(s string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// resolveOrg maps an admin's org filter (a name) onto an id; an operator's is ignored (it
// sees only its own org anyway).
func (s *Server) resolveOrg(ctx context.Context, p identity.Principal, name string) (id int64, view string, errMsg string) {
	name = strings.TrimSpace(name)
	if name == "" || !p.SeesAllOrgs() {
		return 0, "", ""
	}
	org, err := s.deps.Identity.OrgByName(ctx, name)
	if err != nil {
		return 0, "", "no such organisation"
	}
	return org.ID, name, ""
}
