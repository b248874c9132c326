package handlers

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"asterion/handlers/openapi"
)

// openapiPath is where the API's OpenAPI document is served.
const openapiPath = "/sa-core/v1/openapi.json"

// openapiDocument is GET /sa-core/v1/openapi.json: the OpenAPI 3.1 document of the API, public
// like most API documentation (it names routes and shapes, never data). It carries a strong
// ETag; a client that sends it back in If-None-Match gets 304 and no body.
func (s *Server) openapiDocument(c *fiber.Ctx) error {
	doc, etag, err := openapi.JSON()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderETag, etag)
	// Revalidate every time: the document changes with the server, and the ETag makes the
	// check cheap.
	c.Set(fiber.HeaderCacheControl, "no-cache")
	if etagMatches(c.Get(fiber.HeaderIfNoneMatch), etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(doc)
}

// etagMatches reports whether an If-None-Match header names etag (or is "*"), comparing weakly
// as RFC 9110 asks for If-None-Match.
func etagMatches(header, etag string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == etag {
			return true
		}
	}
	return false
}
