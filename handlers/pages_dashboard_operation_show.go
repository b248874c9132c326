package handlers

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/batch"
	"asterion/jobs/deferred"
	"asterion/views"
)

// operationDetail builds the operator view of one operation.
func (s *Server) operationDetail(ctx context.Context, v jobs.Viewer, id uuid.UUID) (views.OperationDetail, error) {
	od, err := s.deps.Reads.GetOperation(ctx, v, id)
	if err != nil {
		return views.OperationDetail{}, err
	}
	op := od.Operation
	st := deferred.Status(op.Status)
	d := views.OperationDetail{ID: op.ID.String(), Kind: op.Kind, Owner: op.Owner, Status: op.Status, Terminal: st.Terminal(),
		CorrelationID: op.CorrelationID.String(), AcceptedAt: op.AcceptedAt, UpdatedAt: op.UpdatedAt, ExpiresAt: op.ExpiresAt,
		TerminalAt: op.TerminalAt, RetryAfterSeconds: op.RetryAfterSeconds, PollCount: op.PollCount,
		ContinuationDigest: deref(op.ContinuationDigest), DiagnosticsDigest: deref(op.DiagnosticsDigest),
		ErrorKind: deref(op.LastErrorKind), ErrorMessage: deref(op.LastErrorMessage),
		ChainVerified: od.ChainBrokenAt < 0, ChainError: od.ChainError,
		Live: views.Live{StreamURL: "/admin/deferred-operations/" + op.ID.String() + "/events",
			PollURL: "/admin/deferred-operations/" + op.ID.String() + "/panel"}}
	if !st.Terminal() {
		next := op.NextPollAt
		d.NextPollAt = &next
		d.CancelReason = deref(op.CancelUnavailableReason)
	}
	if op.SuccessorID != nil {
		d.SuccessorID = op.SuccessorID.String()
	}
	if od.PredecessorID != nil {
		d.PredecessorID = od.PredecessorID.String()
	}
	if own, ok := od.OwnJob(); ok {
		if d.Output, err = s.outputSoFar(ctx, v, own.ID); err != nil {
			return views.OperationDetail{}, err
		}
	}
	var subject map[string]string
	_ = json.Unmarshal(op.Subject, &subject)
	if op.Kind == batch.Kind && s.deps.Batches != nil {
		bt, err := s.deps.Batches.Batch(ctx, jobs.Viewer{OrgID: op.OrgID, AllOrgs: true}, subject["batch_id"])
		if err == nil {
			d.Batch = &views.BatchProgress{ID: bt.ID, Status: bt.Status, Total: bt.TotalLines, Expanded: bt.ExpandedLines,
				Completed: bt.CompletedCount, Failed: bt.FailedCount}
		} else if !errors.Is(err, batch.ErrNotFound) {
			return views.OperationDetail{}, err
		}
	}
	d.SubjectPromptID, d.SubjectJobID = dashUUID(subject["prompt_id"]), dashUUID(subject["job_id"])
	for i, h := range od.History {
		d.History = append(d.History, views.HistoryItem{Seq: h.Seq, Status: string(h.Status), At: h.At,
			DocDigest: h.DocDigest, PrevDigest: h.PrevDigest, EntryDigest: h.EntryDigest, Broken: i == od.ChainBrokenAt})
	}
	orgIDs, userIDs := []int64{op.OrgID}, []int64{op.CreatedBy}
	for _, j := range od.Jobs {
		userIDs = append(userIDs, j.CreatedBy)
	}
	orgs, users := s.names(ctx, orgIDs, userIDs)
	d.Org, d.Creator = orgs[op.OrgID], users[op.CreatedBy]
	for _, j := range od.Jobs {
		r := jobRowOf(j, orgs, users)
		r.Current = j.OperationID != nil && *j.OperationID == op.ID
		d.Jobs = append(d.Jobs, r)
	}
	// A retry supersedes the newest job of the prompt, when it has finished.
	if n := len(d.Jobs); n > 0 && d.Jobs[n-1].Retryable {
		d.RetryJobID = d.Jobs[n-1].ID
	}
	return d, nil
}

// dashUUID returns s when it is a UUID, else "" (a subject is data; only ids are shown).
func dashUUID(s string) string {
	if id, err := uuid.Parse(s); err == nil {
		return id.String()
	}
	return ""
}

// operationPage is GET /admin/deferred-operations/:id.
func (s *Server) operationPage(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	d, err := s.operationDetail(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.dashError(c, err, "operation")
	}
	d.Notice = dashNoticeOf(c)
	return render(c, views.OperationDetailPage(dashPage(c, "Operation "+views.ShortID(d.ID), views.NavOperations), d))
}

// operationPanel is GET /admin/deferred-operations/:id/panel: the refreshable part.
func (s *Server) operationPanel(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	d, err := s.operationDetail(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.dashError(c, err, "operation")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.OperationPanel(d, csrfOf(c)))
}
