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

// NewModel is the model object of model, created at created: the answer of GET
// /v1/models/{model}, and each entry of the list.
func NewModel(model string, created int64) Model {
	return Model{ID: model, Object: "model", Created: created, OwnedBy: "asterion"}
}

// NewModelList lists models in the order given (the default first), each created at created.
func NewModelList(models []string, created int64) ModelList {
	l := ModelList{Object: "list", Data: make([]Model, len(models))}
	for i, m := range models {
		l.Data[i] = NewModel(m, created)
	}
	return l
}
