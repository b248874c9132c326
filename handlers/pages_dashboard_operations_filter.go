package handlers

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs/deferred"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// opsQuery is a parsed operations filter.
type opsQuery struct {
	view   views.OpsFilter
	filter readmodel.OperationFilter
	errs   map[string]string
}

// parseOpsQuery reads the operations filter from get (query or form values). Values that are
// not understood are reported in errs and left out of the filter.
func (s *Server) parseOpsQuery(ctx context.Context, p identity.Principal, get func(string) string, now time.Time) opsQuery {
	q := opsQuery{errs: map[string]string{}}
	q.filter.Limit = dashPageSize
	if v := strings.TrimSpace(get("status")); v != "" {
		if _, err := deferred.ParseStatus(v); err != nil {
			q.errs["status"] = "not a deferred-operation status"
		} else {
			q.view.Status, q.filter.Status = v, v
		}
	}
	if v := strings.TrimSpace(get("kind")); v != "" {
		if len(v) > 64 {
			q.errs["kind"] = "at most 64 characters"
		} else {
			q.view.Kind, q.filter.Kind = v, v
		}
	}
	if v := strings.TrimSpace(get("owner")); v != "" {
		if len(v) > 128 {
			q.errs["owner"] = "at most 128 characters"
		} else {
			q.view.Owner, q.filter.Owner = v, v
		}
	}
	if id, name, msg := s.resolveOrg(ctx, p, get("org")); msg != "" {
		q.errs["org"] = msg
	} else if id != 0 {
		q.view.Org, q.filter.OrgID = name, id
	}
	if v := get("range"); v != "" {
		if d, ok := dashRanges[v]; ok {
			from := now.Add(-d)
			q.view.Range, q.filter.From = v, &from
		} else {
			q.errs["range"] = "not a known range"
		}
	}
	if v := strings.TrimSpace(get("from")); v != "" {
		if t, ok := dashParseTime(v); ok {
			q.view.From, q.filter.From = v, &t
		} else {
			q.errs["from"] = "not a date and time"
		}
	}
	if v := strings.TrimSpace(get("to")); v != "" {
		if t, ok := dashParseTime(v); ok {
			q.view.To, q.filter.To = v, &t
		} else {
			q.errs["to"] = "not a date and time"
		}
	}
	if v := strings.TrimSpace(get("q")); v != "" {
		if id, err := uuid.Parse(v); err == nil {
			q.view.Q, q.filter.Search = id.String(), id.String()
		} else {
			q.errs["q"] = "enter a full operation or correlation id (a UUID)"
		}
	}
	q.filter.Cursor = get("cursor")
	return q
}
