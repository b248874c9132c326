package handlers

import (
	"crypto/subtle"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/handlers/openai"
	"asterion/identity"
)

// Access is what a route needs before its handler runs.
type Access int

// The access levels of the route table.
const (
	// Public routes need no identity.
	Public Access = iota
	// Member routes need any signed-in user of any role.
	Member
	// Operator routes need an operator or admin.
	Operator
	// Admin routes need an admin.
	Admin
)

func (a Access) role() identity.Role {
	switch a {
	case Operator:
		return identity.RoleOperator
	case Admin:
		return identity.RoleAdmin
	}
	return identity.RoleMember
}

// String names the access level for tests and logs.
func (a Access) String() string {
	return [...]string{"public", "member", "operator", "admin"}[a]
}

// Surface says how a route answers a missing identity: an API answers 401 problem+json, a page
// redirects to the login form.
type Surface int

// The surfaces.
const (
	API Surface = iota
	Page
	// OpenAI routes answer as OpenAI's API does: its error object, 401 for a bad key.
	OpenAI
)

const (
	sessionCookie = "asterion_session"
	loginCSRF     = "asterion_login_csrf"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf_token"
)

type principalKey struct{}
type csrfKey struct{}

// principalOf returns who the request acts as; routes behind authorize always have one.
func principalOf(c *fiber.Ctx) identity.Principal {
	p, _ := c.Locals(principalKey{}).(identity.Principal)
	return p
}

func csrfOf(c *fiber.Ctx) string {
	s, _ := c.Locals(csrfKey{}).(string)
	return s
}

// authorize is the one middleware that enforces the route table: it finds the principal (bearer
// token, or session cookie), checks CSRF on state-changing cookie requests, and checks the role.
func (s *Server) authorize(access Access, surface Surface) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if access == Public {
			return c.Next()
		}
		ctx := c.UserContext()
		var (
			p         identity.Principal
			err       error
			bySession bool
		)
		if h := c.Get(fiber.HeaderAuthorization); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				err = identity.ErrUnauthenticated
			} else {
				p, err = s.deps.Identity.AuthenticateToken(ctx, strings.TrimSpace(tok))
			}
		} else {
			var csrf string
			p, csrf, err = s.deps.Identity.SessionPrincipal(ctx, c.Cookies(sessionCookie))
			if err == nil {
				bySession = true
				c.Locals(csrfKey{}, csrf)
			}
		}
		if errors.Is(err, identity.ErrUnauthenticated) {
			if surface == Page {
				if c.Cookies(sessionCookie) != "" {
					// The session ended (signed out elsewhere, revoked, expired, user disabled):
					// the browser drops the dead cookie.
					c.Cookie(&fiber.Cookie{Name: sessionCookie, Value: "", Path: "/", HTTPOnly: true,
						SameSite: fiber.CookieSameSiteLaxMode, Secure: s.deps.SecureCookies, Expires: time.Unix(0, 0)})
				}
				return c.Redirect("/login?next="+url.QueryEscape(string(c.Request().URI().RequestURI())), fiber.StatusSeeOther)
			}
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="asterion"`)
			if surface == OpenAI {
				return writeOpenAIError(c, openai.InvalidAPIKey("Incorrect API key provided: the key must be an Asterion API token, "+
					"sent as Authorization: Bearer <token>."))
			}
			return problem(c, fiber.StatusUnauthorized, "a valid bearer token or session is required")
		}
		if err != nil {
			return err
		}
		c.Locals(principalKey{}, p)
		if bySession && !safeMethod(c.Method()) && !validCSRF(c, csrfOf(c)) {
			return s.forbidden(c, surface, "missing or wrong CSRF token")
		}
		if !p.Role.Allows(access.role()) {
			return s.forbidden(c, surface, "your role does not allow this")
		}
		return c.Next()
	}
}

func safeMethod(m string) bool {
	return m == fiber.MethodGet || m == fiber.MethodHead || m == fiber.MethodOptions
}

// validCSRF accepts the token from the htmx header or a form field of the body, never from the
// query string, which ends up in logs, history and Referer headers.
func validCSRF(c *fiber.Ctx, want string) bool {
	got := c.Get(csrfHeader)
	if got == "" {
		got = bodyFormValue(c, csrfField)
	}
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// bodyFormValue reads a field of a url-encoded or multipart body (fasthttp's FormValue would
// also look at the query string).
func bodyFormValue(c *fiber.Ctx, key string) string {
	ct := string(c.Request().Header.ContentType())
	switch {
	case strings.HasPrefix(ct, fiber.MIMEApplicationForm):
		return string(c.Request().PostArgs().Peek(key))
	case strings.HasPrefix(ct, fiber.MIMEMultipartForm):
		if f, err := c.MultipartForm(); err == nil && len(f.Value[key]) > 0 {
			return f.Value[key][0]
		}
	}
	return ""
}

func (s *Server) forbidden(c *fiber.Ctx, surface Surface, detail string) error {
	switch surface {
	case Page:
		return s.errorPage(c, fiber.StatusForbidden, "Not allowed", detail)
	case OpenAI:
		return writeOpenAIError(c, openai.PermissionDenied(detail))
	}
	return problem(c, fiber.StatusForbidden, detail)
}
