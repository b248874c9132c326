package batch

import (
	"context"
	"errors"
	"fmt"

	"asterion/jobs"
)

// The bounds of a list of files, as OpenAI's: at most MaxFileLimit a page, DefaultFileLimit
// when the caller names none.
const (
	MaxFileLimit     = 10000
	DefaultFileLimit = MaxFileLimit
)

// The orders of a list of files, by creation time.
const (
	OrderAsc  = "asc"
	OrderDesc = "desc"
)

// FileQuery is what ListFiles reads.
type FileQuery struct {
	// Purpose keeps the files of that purpose only; "" keeps every purpose.
	Purpose string
	// After is a file id: the page starts after it, in the list's order ("" from the start).
	After string
	// Limit is how many files a page holds at most, 1..MaxFileLimit.
	Limit int
	// Order is OrderAsc (oldest first) or OrderDesc (newest first); "" is OrderDesc.
	Order string
}

// FilePage is one page of a list of files.
type FilePage struct {
	Files   []File
	HasMore bool
}

// ListFiles is the files v may see, as File finds them (a member its own uploads and the
// output and error files of its own batches, an operator every file of its org), of v's own
// org only even for an admin, as List does for batches: a page of at most q.Limit in q.Order
// by creation time (then id), after the file q.After. A limit out of range or another order is
// an *InvalidError, and so is an after that names no file v may list.
func (b *Batches) ListFiles(ctx context.Context, v jobs.Viewer, q FileQuery) (FilePage, error) {
	if q.Limit < 1 || q.Limit > MaxFileLimit {
		return FilePage{}, invalid("limit", "invalid_value", "Invalid 'limit': must be an integer between 1 and %d.", MaxFileLimit)
	}
	cmp, dir := "<", "DESC"
	switch q.Order {
	case "", OrderDesc:
	case OrderAsc:
		cmp, dir = ">", "ASC"
	default:
		return FilePage{}, invalid("order", "invalid_value", "Invalid 'order': must be '%s' or '%s'.", OrderAsc, OrderDesc)
	}
	own := v
	own.AllOrgs = false
	sel := visibleTo(b.db.NewSelect().Model((*File)(nil)), own)
	if q.Purpose != "" {
		sel = sel.Where("purpose = ?", q.Purpose)
	}
	if q.After != "" {
		cur, err := b.File(ctx, own, q.After)
		if errors.Is(err, ErrNotFound) {
			return FilePage{}, invalid("after", "invalid_value", "Invalid 'after': no file with id '%s' found.", q.After)
		}
		if err != nil {
			return FilePage{}, err
		}
		sel = sel.Where("(created_at, id) "+cmp+" (?, ?)", cur.CreatedAt, cur.ID)
	}
	var rows []File
	if err := sel.OrderExpr("created_at "+dir+", id "+dir).Limit(q.Limit+1).Scan(ctx, &rows); err != nil {
		return FilePage{}, fmt.Errorf("list files: %w", err)
	}
	p := FilePage{Files: rows}
	if len(rows) > q.Limit {
		p.Files, p.HasMore = rows[:q.Limit], true
	}
	return p, nil
}
