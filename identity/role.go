package identity

import "fmt"

// Role is what a user may do: member < operator < admin.
type Role string

// The roles a user may have, from least to most (docs/api.md).
const (
	RoleMember   Role = "member"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
)

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleMember, RoleOperator, RoleAdmin:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want member, operator or admin)", s)
}

func (r Role) rank() int {
	switch r {
	case RoleMember:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Allows reports whether a user with role r may use something that needs role need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() && need.rank() > 0 }

// Principal is who a request acts as.
type Principal struct {
	UserID   int64
	UserName string
	OrgID    int64
	OrgName  string
	Role     Role
}

// SeesAllOrgs reports whether the principal may look across orgs (admins only).
func (p Principal) SeesAllOrgs() bool { return p.Role == RoleAdmin }

// SeesOrg reports whether the principal sees everything of its org (operators and admins).
func (p Principal) SeesOrg() bool { return p.Role.Allows(RoleOperator) }
