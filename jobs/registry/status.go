package registry

import (
	"encoding/json"

	"asterion/db"
	"asterion/jobs/deferred"
)

// StatusDocOf builds the deferred-operation-status.v1 document of a registry row.
func StatusDocOf(op db.Operation) (deferred.StatusDoc, error) {
	st, err := deferred.ParseStatus(op.Status)
	if err != nil {
		return deferred.StatusDoc{}, err
	}
	updated := op.UpdatedAt
	switch {
	case !st.Terminal():
		cancel := deferred.Cancelable(deferred.CancelHref(op.ID))
		if op.CancelUnavailableReason != nil {
			cancel = deferred.NotCancelable(*op.CancelUnavailableReason)
		}
		return deferred.NewActiveStatus(op.ID, op.Kind, st, updated, op.ExpiresAt, op.RetryAfterSeconds, cancel)
	case st == deferred.StatusCompleted:
		result := op.Result
		if len(result) == 0 {
			result = json.RawMessage(`{}`)
		}
		return deferred.NewCompletedStatus(op.ID, op.Kind, updated, op.ExpiresAt, result)
	case st == deferred.StatusCancelled:
		return deferred.NewCancelledStatus(op.ID, op.Kind, updated, op.ExpiresAt)
	}
	info := deferred.ErrorInfo{Kind: "unknown", Message: "no detail recorded"}
	if op.LastErrorKind != nil {
		info.Kind = *op.LastErrorKind
	}
	if op.LastErrorMessage != nil && *op.LastErrorMessage != "" {
		info.Message = *op.LastErrorMessage
	}
	return deferred.NewFailedStatus(op.ID, op.Kind, st, updated, op.ExpiresAt, info)
}

// HandleOf rebuilds the handle of a registry row as it was issued at acceptance.
func HandleOf(op db.Operation) deferred.Handle {
	subject := map[string]string{}
	_ = json.Unmarshal(op.Subject, &subject)
	cancel := deferred.Cancelable(deferred.CancelHref(op.ID))
	if op.CancelUnavailableReason != nil {
		cancel = deferred.NotCancelable(*op.CancelUnavailableReason)
	}
	return deferred.Handle{OperationID: op.ID, Kind: op.Kind, Owner: op.Owner, Status: deferred.StatusPending,
		AcceptedAt: deferred.NormalizeTime(op.AcceptedAt), ExpiresAt: deferred.NormalizeTime(op.ExpiresAt),
		RetryAfterSeconds: op.RetryAfterSeconds, StatusHref: deferred.StatusHref(op.ID), Cancel: cancel,
		CorrelationID: op.CorrelationID.String(), Subject: subject}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
