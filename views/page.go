// Package views holds the server-rendered HTML of Asterion as templ components.
//
// Components take plain data (the structs in this package, strings and numbers) and know
// nothing of HTTP, sessions or the database: handlers build the data and render the component.
// Edit the .templ files and run `make generate`, which regenerates the *_templ.go files and the
// Tailwind CSS in static/css/app.css; both are committed.
package views

import (
	"encoding/json"
	"strings"
)

// Roles, as identity names them.
const (
	RoleMember   = "member"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// Nav values of Page: which item of the header navigation is shown as the current page.
const (
	NavMission    = "mission"
	NavOperations = "operations"
	NavJobs       = "jobs"
	NavRiver      = "river"
)

// User is the signed-in user as the pages show it.
type User struct {
	Name    string
	Role    string // "member", "operator" or "admin"
	OrgName string
}

// Page is what every page inside Layout needs.
type Page struct {
	// Title is the page's own title; the document title becomes "Title · Asterion".
	Title string
	// User is the signed-in user, or nil on pages shown to anyone (errors).
	User *User
	// CSRFToken is sent by htmx in the X-CSRF-Token header and by plain forms as csrf_token.
	CSRFToken string
	// Nav is the active navigation item: NavMission, NavOperations, NavJobs or NavRiver.
	Nav string
}

// navItem is one link of the header navigation.
type navItem struct {
	key, label, href string
}

// navItems returns the navigation links u may follow, in display order.
func navItems(u *User) []navItem {
	if u == nil {
		return nil
	}
	items := []navItem{{NavMission, "Mission", "/mission"}}
	if u.Role == RoleOperator || u.Role == RoleAdmin {
		items = append(items,
			navItem{NavOperations, "Operations", "/admin/deferred-operations"},
			navItem{NavJobs, "Jobs", "/admin/jobs"},
		)
	}
	if u.Role == RoleAdmin {
		items = append(items, navItem{NavRiver, "River", "/admin/river"})
	}
	return items
}

// htmxConfig is htmx's configuration (the htmx-config meta tag): no eval (trigger filters,
// js: values, hx-on), no indicator <style> element and no script elements run from swapped
// content, so that htmx works under the server's Content-Security-Policy.
const htmxConfig = `{"allowEval":false,"allowScriptTags":false,"includeIndicatorStyles":false}`

// csrfHeaders returns the JSON object for the hx-headers attribute of <body>. templ escapes it
// as an attribute value when it is rendered.
func csrfHeaders(token string) string {
	b, err := json.Marshal(map[string]string{"X-CSRF-Token": token})
	if err != nil {
		// A map of strings always marshals; keep the page working without the header if not.
		return "{}"
	}
	return string(b)
}

// documentTitle returns the <title> text for a page title.
func documentTitle(title string) string {
	if strings.TrimSpace(title) == "" {
		return "Asterion"
	}
	return title + " · Asterion"
}

// initials returns up to two letters for the user's avatar.
func initials(name string) string {
	var out []rune
	for _, f := range strings.Fields(name) {
		for _, r := range f {
			out = append(out, r)
			break
		}
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return strings.ToUpper(string(out))
}
