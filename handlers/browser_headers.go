package handlers

import (
	"strings"

	"github.com/gofiber/fiber/v2"
)

// ContentSecurityPolicy is sent with every answer. Scripts and styles come from the server's
// own /static only: no inline script, no eval (htmx runs with allowEval off), no framing, no
// plugin, no <base> rewrite, forms post back to this origin. Inline style attributes are allowed
// (style-src-attr), because the health page draws its bars with a computed width; they cannot
// run script, and <style> elements stay refused.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"style-src-attr 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'; " +
	"frame-ancestors 'none'; form-action 'self'"

// riverUIPolicy is the policy of River's own UI (admins only, at /admin/river): the same, except
// that its bundled libraries add <style> elements (toasts, theme switching), so styles may be
// inline there. Scripts stay same-origin only.
const riverUIPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// setBrowserHeaders sets the browser headers every answer carries (docs/api.md) on c's answer, with
// Cache-Control: no-store, which a handler that chooses its own caching replaces (static files
// set max-age, the streams no-cache): no shared or back-button cache keeps a signed-in page.
// They are harmless on JSON, scripts and styles, so every answer gets them and no page can miss
// them; pages for anonymous callers too (the sign-in form carries a fresh CSRF cookie).
func setBrowserHeaders(c *fiber.Ctx) {
	h := &c.Response().Header
	if strings.HasPrefix(c.Path(), "/admin/river") {
		h.Set(fiber.HeaderContentSecurityPolicy, riverUIPolicy)
	} else {
		h.Set(fiber.HeaderContentSecurityPolicy, ContentSecurityPolicy)
	}
	h.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	h.Set(fiber.HeaderReferrerPolicy, "same-origin")
	h.Set(fiber.HeaderXFrameOptions, "DENY")
	h.Set(fiber.HeaderCacheControl, "no-store")
}

// browserHeaders sets the browser headers before the handler runs.
func browserHeaders(c *fiber.Ctx) error {
	setBrowserHeaders(c)
	return c.Next()
}
