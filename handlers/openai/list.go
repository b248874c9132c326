package openai

import "asterion/jobs/batch"

// List is a page of objects as OpenAI's cursor-paged lists answer it, with the ids of its
// first and last object for the next page's after.
type List[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// newList is the list of rows as object makes each, id naming a row for the cursor.
func newList[S, T any](rows []S, hasMore bool, object func(S) T, id func(S) string) List[T] {
	l := List[T]{Object: "list", Data: make([]T, len(rows)), HasMore: hasMore}
	for i, r := range rows {
		l.Data[i] = object(r)
	}
	if n := len(rows); n > 0 {
		first, last := id(rows[0]), id(rows[n-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l
}

// NewFileList is the list object of page p.
func NewFileList(p batch.FilePage) List[FileObject] {
	return newList(p.Files, p.HasMore, NewFileObject, func(f batch.File) string { return f.ID })
}
