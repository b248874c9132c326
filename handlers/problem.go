package handlers

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
)

// Problem is an RFC 9457 problem document; Errors names the fields that broke a rule.
type Problem struct {
	Type   string            `json:"type"`
	Title  string            `json:"title"`
	Status int               `json:"status"`
	Detail string            `json:"detail,omitempty"`
	Errors map[string]string `json:"errors,omitempty"`
}

// problemTypeBase prefixes the type of a problem this API defines itself (a limit it enforces),
// so clients can branch on the type's last segment.
const problemTypeBase = "/sa-core/v1/problems/"

// typedProblem writes a problem of one of this API's own types, such as budget-exhausted.
func typedProblem(c *fiber.Ctx, status int, kind, detail string) error {
	return writeProblem(c, Problem{Type: problemTypeBase + kind, Title: statusTitle(status), Status: status, Detail: detail})
}

// problem writes an application/problem+json answer.
func problem(c *fiber.Ctx, status int, detail string) error {
	return writeProblem(c, Problem{Type: "about:blank", Title: statusTitle(status), Status: status, Detail: detail})
}

// validationProblem writes a 422 naming each field and its broken rule.
func validationProblem(c *fiber.Ctx, fields map[string]string) error {
	return writeProblem(c, Problem{Type: "about:blank", Title: statusTitle(fiber.StatusUnprocessableEntity),
		Status: fiber.StatusUnprocessableEntity, Detail: "the request breaks one or more field rules", Errors: fields})
}

func writeProblem(c *fiber.Ctx, p Problem) error {
	c.Status(p.Status)
	c.Set(fiber.HeaderContentType, "application/problem+json")
	return c.JSON(p, "application/problem+json")
}

func statusTitle(status int) string {
	if t := utils.StatusMessage(status); t != "" {
		return t
	}
	return "Error"
}
