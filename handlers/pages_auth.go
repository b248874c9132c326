package handlers

import (
	"crypto/subtle"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/identity"
	"asterion/views"
)

func (s *Server) home(c *fiber.Ctx) error { return c.Redirect("/mission", fiber.StatusSeeOther) }

// loginForm renders the sign-in page with a double-submit CSRF token (no session exists yet).
// The token stops another site from signing a browser in; it cannot stop a script, which can
// fetch the form like a browser: the sign-in limits of identity.SignIn are what stop guessing.
func (s *Server) loginForm(c *fiber.Ctx) error {
	return s.renderLogin(c, views.LoginData{Next: safeNext(c.Query("next"))})
}

func (s *Server) renderLogin(c *fiber.Ctx, d views.LoginData) error {
	d.CSRFToken = identity.NewSecret("")
	d.Next = safeNext(d.Next)
	c.Cookie(&fiber.Cookie{Name: loginCSRF, Value: d.CSRFToken, Path: "/login", HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode, Secure: s.deps.SecureCookies, MaxAge: 3600})
	return render(c, views.LoginPage(d))
}

// login checks the form and opens a session. A wrong name and a wrong password answer the
// same; too many failures answer 429 with when to try again, and a server with every hash slot
// busy answers 503. Every field is read from the body, never from the query string.
func (s *Server) login(c *fiber.Ctx) error {
	form, err := parseLoginForm(c.Get(fiber.HeaderContentType), c.Body())
	if err != nil {
		c.Status(fiber.StatusBadRequest)
		return s.renderLogin(c, views.LoginData{Error: "Your sign-in form could not be read. Please try again."})
	}
	want := c.Cookies(loginCSRF)
	if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(form.CSRF)) != 1 {
		c.Status(fiber.StatusForbidden)
		return s.renderLogin(c, views.LoginData{Error: "Your sign-in form expired. Please try again.", Username: form.Username, Next: form.Next})
	}
	addr := s.clientAddress(c)
	cookie, sess, _, err := s.deps.Identity.SignIn(c.UserContext(), form.Username, form.Password, addr)
	var limit *identity.SignInLimitError
	switch {
	case errors.As(err, &limit):
		s.log.Info("sign-in refused: too many failures", "user", form.Username, "address", addr, "retry_at", limit.RetryAt)
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(limit.RetryAfter()/time.Second)))
		c.Status(fiber.StatusTooManyRequests)
		return s.renderLogin(c, views.LoginData{Error: "Too many failed sign-ins.", RetryAt: limit.RetryAt,
			Username: form.Username, Next: form.Next})
	case errors.Is(err, identity.ErrSignInBusy):
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(identity.SignInBusyRetryAfter/time.Second)))
		c.Status(fiber.StatusServiceUnavailable)
		return s.renderLogin(c, views.LoginData{Error: "The server is busy signing people in. Please try again in a moment.",
			Username: form.Username, Next: form.Next})
	case errors.Is(err, identity.ErrUnauthenticated):
		s.log.Info("sign-in failed", "user", form.Username, "address", addr)
		c.Status(fiber.StatusUnauthorized)
		return s.renderLogin(c, views.LoginData{Error: "Wrong user name or password.", Username: form.Username, Next: form.Next})
	case err != nil:
		return err
	}
	c.Cookie(&fiber.Cookie{Name: sessionCookie, Value: cookie, Path: "/", HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode, Secure: s.deps.SecureCookies, Expires: sess.ExpiresAt})
	c.ClearCookie(loginCSRF)
	return c.Redirect(safeNext(form.Next), fiber.StatusSeeOther)
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
