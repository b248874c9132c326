package handlers

import (
	"net/url"
	"slices"

	"github.com/gofiber/fiber/v2"

	"asterion/handlers/openai"
)

// getModel is GET /v1/models/{model}: the model as GET /v1/models lists it, if the deployment
// admits it, else OpenAI's model_not_found. The id is the rest of the path, unescaped, so that
// an id with a slash ("meta-llama/Llama-3-8B") or a colon ("ft:gpt-4o:org:x") is read whole,
// whether the client escaped it (openai-go sends the slash as %2F) or not.
func (s *Server) getModel(c *fiber.Ctx) error {
	model := c.Params("*")
	if unescaped, err := url.PathUnescape(model); err == nil {
		model = unescaped
	}
	if !slices.Contains(s.deps.Jobs.Admission().Models(), model) {
		return writeOpenAIError(c, openai.ModelNotFound(model))
	}
	return c.JSON(openai.NewModel(model, modelsCreated))
}
