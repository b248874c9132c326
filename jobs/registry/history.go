package registry

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/deferred"
)

// NextHistory builds the digest-chained history entry for op's current status, chained onto
// the head recorded on the row (whose status was prevStatus), and moves the row's head to it.
// The caller writes the row and then the entry (the entry references the row).
func NextHistory(op *db.Operation, prevStatus string) (db.OperationHistory, error) {
	doc, err := StatusDocOf(*op)
	if err != nil {
		return db.OperationHistory{}, fmt.Errorf("status document of operation %s: %w", op.ID, err)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return db.OperationHistory{}, fmt.Errorf("marshal status of operation %s: %w", op.ID, err)
	}
	var prev *deferred.HistoryEntry
	if op.HistorySeq > 0 {
		if op.HistoryDigest == nil || op.HistoryAt == nil {
			return db.OperationHistory{}, fmt.Errorf("operation %s: history head %d has no digest or time", op.ID, op.HistorySeq)
		}
		prev = &deferred.HistoryEntry{Seq: op.HistorySeq, Status: deferred.Status(prevStatus), At: *op.HistoryAt,
			EntryDigest: *op.HistoryDigest}
	}
	st, _ := deferred.ParseStatus(op.Status)
	// A row's time is its transaction's start; a transaction that started earlier may commit
	// after a later one, so an entry is never dated before the entry it follows.
	at := op.UpdatedAt
	if prev != nil && at.Before(prev.At) {
		at = prev.At
	}
	e, err := deferred.NewHistoryEntry(prev, op.HistorySeq+1, st, at, raw)
	if err != nil {
		return db.OperationHistory{}, fmt.Errorf("history entry of operation %s: %w", op.ID, err)
	}
	op.HistorySeq, op.HistoryDigest, op.HistoryAt = e.Seq, &e.EntryDigest, &e.At
	return db.OperationHistory{OperationID: op.ID, Seq: e.Seq, Status: string(e.Status), At: e.At,
		DocDigest: e.DocDigest, PrevDigest: e.PrevDigest, EntryDigest: e.EntryDigest}, nil
}

func historyEntryOf(r db.OperationHistory) deferred.HistoryEntry {
	return deferred.HistoryEntry{Seq: r.Seq, Status: deferred.Status(r.Status), At: r.At,
		DocDigest: r.DocDigest, PrevDigest: r.PrevDigest, EntryDigest: r.EntryDigest}
}

// History returns an operation's status history, oldest first.
func (r *Registry) History(ctx context.Context, id uuid.UUID) ([]deferred.HistoryEntry, error) {
	var rows []db.OperationHistory
	if err := r.db.NewSelect().Model(&rows).Where("operation_id = ?", id).OrderExpr("seq").Scan(ctx); err != nil {
		return nil, fmt.Errorf("history of operation %s: %w", id, err)
	}
	out := make([]deferred.HistoryEntry, len(rows))
	for i, row := range rows {
		out[i] = historyEntryOf(row)
	}
	return out, nil
}

// HistoryHeadMismatch says how a history that verifies on its own disagrees with the head
// recorded on the registry row: entries cut off its end leave a chain that still verifies,
// and only the head shows it. A history longer than the head read before it is a transition
// that landed in between, not damage.
func HistoryHeadMismatch(op db.Operation, hist []deferred.HistoryEntry) string {
	if op.HistorySeq == 0 {
		return ""
	}
	var last deferred.HistoryEntry
	if len(hist) > 0 {
		last = hist[len(hist)-1]
	}
	switch {
	case last.Seq < op.HistorySeq:
		return fmt.Sprintf("the history ends at entry %d but the registry row records %d entries: entries were removed", last.Seq, op.HistorySeq)
	case last.Seq == op.HistorySeq && op.HistoryDigest != nil && last.EntryDigest != *op.HistoryDigest:
		return fmt.Sprintf("entry %d does not match the digest the registry row records for it", last.Seq)
	}
	return ""
}
