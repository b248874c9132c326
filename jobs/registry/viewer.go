package registry

import (
	"github.com/uptrace/bun"

	"asterion/jobs/feed"
)

// Viewer is who asks: it decides which operations, jobs and prompts are visible.
type Viewer struct {
	OrgID  int64
	UserID int64
	// OrgWide sees every object of its org (operators).
	OrgWide bool
	// AllOrgs sees every org (admins).
	AllOrgs bool
}

// Scope returns the change-feed scope of v.
func (v Viewer) Scope() feed.Scope {
	sc := feed.Scope{OrgID: v.OrgID, AllOrgs: v.AllOrgs}
	if !v.OrgWide && !v.AllOrgs {
		sc.UserID = v.UserID
	}
	return sc
}

// Where limits a query on a table with org_id and created_by columns to what v may see.
func (v Viewer) Where(q *bun.SelectQuery, alias string) *bun.SelectQuery {
	if v.AllOrgs {
		return q
	}
	q = q.Where(alias+".org_id = ?", v.OrgID)
	if !v.OrgWide {
		q = q.Where(alias+".created_by = ?", v.UserID)
	}
	return q
}

// Sees reports whether v may see an object of org and creator.
func (v Viewer) Sees(orgID, createdBy int64) bool {
	if v.AllOrgs {
		return true
	}
	if orgID != v.OrgID {
		return false
	}
	return v.OrgWide || createdBy == v.UserID
}
