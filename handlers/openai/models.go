package openai

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// NewModelList lists models in the order given (the default first), each created at created.
func NewModelList(models []string, created int64) ModelList {
	l := ModelList{Object: "list", Data: make([]Model, len(models))}
	for i, m := range models {
		l.Data[i] = Model{ID: m, Object: "model", Created: created, OwnedBy: "asterion"}
	}
	return l
}
