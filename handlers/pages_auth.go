package handlers

import (
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/identity"
	"asterion/views"
)

func (s *Server) home(c *fiber.Ctx) error { return c.Redirect("/mission", fiber.StatusSeeOther) }

// loginForm renders the sign-in page with a double-submit CSRF token (no session exists yet).
func (s *Server) loginForm(c *fiber.Ctx) error {
	return s.renderLogin(c, "", "")
}

func (s *Server) renderLogin(c *fiber.Ctx, msg, username string) error {
	token := identity.NewSecret("")
	c.Cookie(&fiber.Cookie{Name: loginCSRF, Value: token, Path: "/login", HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode, Secure: s.deps.SecureCookies, MaxAge: 3600})
	return render(c, views.LoginPage(views.LoginData{Error: msg, Username: username, CSRFToken: token, Next: safeNext(c.Query("next", c.FormValue("next")))}))
}

// login checks the form and opens a session. A wrong name and a wrong password answer the same.
func (s *Server) login(c *fiber.Ctx) error {
	want := c.Cookies(loginCSRF)
	got := c.FormValue(csrfField)
	if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
		c.Status(fiber.StatusForbidden)
		return s.renderLogin(c, "Your sign-in form expired. Please try again.", c.FormValue("username"))
	}
	name := strings.TrimSpace(c.FormValue("username"))
	cookie, sess, _, err := s.deps.Identity.Login(c.UserContext(), name, c.FormValue("password"))
	if errors.Is(err, identity.ErrUnauthenticated) {
		c.Status(fiber.StatusUnauthorized)
		return s.renderLogin(c, "Wrong user name or password.", name)
	}
	if err != nil {
		return err
	}
	c.Cookie(&fiber.Cookie{Name: sessionCookie, Value: cookie, Path: "/", HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode, Secure: s.deps.SecureCookies, Expires: sess.ExpiresAt})
	c.ClearCookie(loginCSRF)
	return c.Redirect(safeNext(c.FormValue("next")), fiber.StatusSeeOther)
}

func (s *Server) logout(c *fiber.Ctx) error {
	if err := s.deps.Identity.Logout(c.UserContext(), c.Cookies(sessionCookie)); err != nil {
		return err
	}
	c.Cookie(&fiber.Cookie{Name: sessionCookie, Value: "", Path: "/", HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode,
		Secure: s.deps.SecureCookies, Expires: time.Unix(0, 0)})
	return c.Redirect("/login", fiber.StatusSeeOther)
}

// safeNext keeps redirects on this site: only absolute paths, never //host or a scheme, and no
// control characters (browsers drop tabs and newlines, so "/\t/host" means "//host"; a newline
// would also split the Location header).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.HasPrefix(next, "/login") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "/mission"
	}
	return next
}
