package handlers

import "github.com/gofiber/fiber/v2"

// ContentSecurityPolicy is sent with every answer. Scripts and styles come from the server's
// own /static only: no inline script, no eval (htmx runs with allowEval off), no framing, no
// plugin, no <base> rewrite, forms post back to this origin. Inline style attributes are allowed
// (style-src-attr), because the health page draws its bars with a computed width; they cannot
// run script, and <style> elements stay refused.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"style-src-attr 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'; " +
	"frame-ancestors 'none'; form-action 'self'"

// setBrowserHeaders sets the headers of CONTRACT.md "Browser headers" on c's answer. They are
// harmless on JSON, scripts and styles, so every answer gets them and no page can miss them.
func setBrowserHeaders(c *fiber.Ctx) {
	h := &c.Response().Header
	h.Set(fiber.HeaderContentSecurityPolicy, ContentSecurityPolicy)
	h.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	h.Set(fiber.HeaderReferrerPolicy, "same-origin")
	h.Set(fiber.HeaderXFrameOptions, "DENY")
}

// browserHeaders sets the browser headers before the handler runs, and marks every answer that
// chose no caching of its own Cache-Control: no-store (static files set max-age, the streams
// no-cache), so that no shared or back-button cache keeps a signed-in page. Pages for
// anonymous callers get it too: the sign-in form carries a fresh CSRF cookie.
func browserHeaders(c *fiber.Ctx) error {
	setBrowserHeaders(c)
	err := c.Next()
	if len(c.Response().Header.Peek(fiber.HeaderCacheControl)) == 0 {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
	return err
}
