package openai

import (
	"fmt"
	"sort"
	"strings"
)

// FieldsError is the answer to a request that breaks Asterion's field rules: the first
// broken field (in name order, so the answer is the same every time) as a 400 naming the
// OpenAI parameter, or the 404 of an unknown model. model is the model the request asked for.
func FieldsError(fields map[string]string, model string) *APIError {
	if _, bad := fields["options.model"]; bad {
		return ModelNotFound(model)
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return InvalidRequest("The request is invalid.", "", "")
	}
	name := names[0]
	param := paramOf(name)
	return InvalidRequest(fmt.Sprintf("Invalid '%s': %s.", param, fields[name]), param, "invalid_value")
}

// paramOf is the OpenAI parameter an Asterion field stands for.
func paramOf(field string) string {
	switch {
	case field == "prompt":
		return "messages"
	case strings.HasPrefix(field, "options."):
		return strings.TrimPrefix(field, "options.")
	}
	return field
}
