package batch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"asterion/jobs"
)

// The purposes of stored files: what a caller uploads, and what a batch writes.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// newID is prefix and 24 random hex digits, as OpenAI's ids look.
func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Upload stores the file of a multipart form read part by part from form: its "file" part,
// streamed into lines in chunks of ChunkLines, and its "purpose" part, which must be "batch".
// The file is written in one transaction, so a refused upload leaves nothing behind. A form
// that breaks a rule (no file, another purpose, more than MaxLines lines or MaxBytes bytes) is
// an *InvalidError.
func (b *Batches) Upload(ctx context.Context, v jobs.Viewer, form *multipart.Reader) (File, error) {
	var out File
	err := b.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		f := File{ID: newID("file-"), OrgID: v.OrgID, CreatedBy: v.UserID, EndsWithNewline: true}
		var purpose *string
		sawFile := false
		for {
			part, err := form.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return invalid("file", "invalid_multipart", "The body is not a readable multipart form: %v.", err)
			}
			switch part.FormName() {
			case "purpose":
				raw, err := io.ReadAll(io.LimitReader(part, 65))
				if err != nil {
					return invalid("purpose", "invalid_multipart", "The purpose could not be read: %v.", err)
				}
				p := string(raw)
				purpose = &p
			case "file":
				if sawFile {
					return invalid("file", "invalid_value", "Give one file per upload.")
				}
				sawFile = true
				f.Filename = part.FileName()
				if f.Filename == "" {
					f.Filename = "upload.jsonl"
				}
				if !utf8.ValidString(f.Filename) || len(f.Filename) > 255 {
					return invalid("file", "invalid_value", "The file name must be valid UTF-8 of at most 255 bytes.")
				}
				// The row comes first: the lines refer to it.
				if _, err := tx.NewInsert().Model(&f).Exec(ctx); err != nil {
					return fmt.Errorf("insert file %s: %w", f.ID, err)
				}
				if err := writeLines(ctx, tx, &f, part); err != nil {
					return err
				}
			default:
				if _, err := io.Copy(io.Discard, io.LimitReader(part, 1<<20)); err != nil {
					return invalid("file", "invalid_multipart", "The body is not a readable multipart form: %v.", err)
				}
			}
		}
		switch {
		case purpose == nil:
			return invalid("purpose", "missing_required_parameter", "Missing required parameter: 'purpose'.")
		case *purpose != PurposeBatch:
			return invalid("purpose", "invalid_value", "Invalid value for 'purpose': the front door takes files of purpose 'batch' only.")
		case !sawFile:
			return invalid("file", "missing_required_parameter", "Missing required parameter: 'file'.")
		case f.LineCount == 0:
			return invalid("file", "invalid_file", "The file holds no line: a batch input file is JSONL, one request a line.")
		}
		f.Purpose = *purpose
		if _, err := tx.NewUpdate().Model(&f).Column("purpose", "bytes", "line_count", "ends_with_newline").
			WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("record file %s: %w", f.ID, err)
		}
		out = f
		return nil
	})
	return out, err
}

// writeLines reads r line by line into f's lines, ChunkLines rows an INSERT; a blank line is
// kept (it is part of the file) but not counted as a request line's room.
func writeLines(ctx context.Context, tx bun.Tx, f *File, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	chunk := make([]fileLine, 0, ChunkLines)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return fmt.Errorf("insert lines of file %s: %w", f.ID, err)
		}
		chunk = chunk[:0]
		return nil
	}
	var line []byte
	held := 0
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxLineBytes {
			return invalid("file", "line_too_long", "Line %d is longer than %d bytes.", f.LineCount+1, MaxLineBytes)
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return invalid("file", "invalid_multipart", "The file could not be read: %v.", err)
		}
		if len(line) > 0 {
			f.Bytes += int64(len(line))
			if f.Bytes > MaxBytes {
				return invalid("file", "file_too_large", "The file is larger than %d bytes.", MaxBytes)
			}
			body, nl := bytes.CutSuffix(line, []byte("\n"))
			f.EndsWithNewline = nl
			f.LineCount++
			if f.LineCount > MaxLines {
				return invalid("file", "too_many_lines", "The file has more than %d lines.", MaxLines)
			}
			chunk = append(chunk, fileLine{FileID: f.ID, LineNo: f.LineCount, Body: bytes.Clone(body)})
			held += len(body)
			line = line[:0]
			if len(chunk) == ChunkLines || held >= chunkBytes {
				held = 0
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err != nil {
			return flush()
		}
	}
}

// insertLines writes lines as lines from..from+len-1 of file id in chunks of ChunkLines.
func insertLines(ctx context.Context, idb bun.IDB, id string, from int, lines [][]byte) error {
	rows := make([]fileLine, 0, len(lines))
	for i, l := range lines {
		rows = append(rows, fileLine{FileID: id, LineNo: from + i, Body: l})
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := idb.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("insert lines of file %s: %w", id, err)
	}
	return nil
}

// visibleTo limits q, on files or batches, to those v may see and act on, as for prompts and
// operations: a member its own (a batch's output and error files are its creator's), an
// operator every one of its org, an admin every org's.
func visibleTo(q *bun.SelectQuery, v jobs.Viewer) *bun.SelectQuery {
	if v.AllOrgs {
		return q
	}
	q = q.Where("org_id = ?", v.OrgID)
	if !v.OrgWide {
		q = q.Where("created_by = ?", v.UserID)
	}
	return q
}

// File is the file id, if v may see it.
func (b *Batches) File(ctx context.Context, v jobs.Viewer, id string) (File, error) {
	var f File
	err := visibleTo(b.db.NewSelect().Model(&f).Where("id = ?", id), v).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, fmt.Errorf("file %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return File{}, fmt.Errorf("read file %s: %w", id, err)
	}
	return f, nil
}

// DeleteFile deletes the file id, if v may see it, with its lines. The input of a batch that has not
// read all of it yet is ErrConflict.
func (b *Batches) DeleteFile(ctx context.Context, v jobs.Viewer, id string) error {
	return b.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		q := visibleTo(tx.NewSelect().Model((*File)(nil)).Column("id").Where("id = ?", id), v).For("UPDATE")
		var found string
		if err := q.Scan(ctx, &found); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("file %s: %w", id, ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("lock file %s: %w", id, err)
		}
		// A batch reads its input a chunk at a time while it queues its jobs: deleting the
		// file under it would leave its unread lines neither run nor reported.
		var reading string
		err := tx.NewSelect().Model((*Batch)(nil)).Column("id").Where("input_file_id = ?", id).
			Where("status = ? OR (status = ? AND expanded_lines < total_lines)", StatusValidating, StatusInProgress).
			Limit(1).Scan(ctx, &reading)
		switch {
		case err == nil:
			return fmt.Errorf("file %s is the input of batch %s, which has not read all of it yet; "+
				"delete it once the batch has queued every request, or cancel the batch: %w", id, reading, ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("find the batches reading file %s: %w", id, err)
		}
		if _, err := tx.NewDelete().Model((*File)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("delete file %s: %w", id, err)
		}
		return nil
	})
}

// WriteContent writes the content of file f to w as it was stored, a chunk of lines a query.
func (b *Batches) WriteContent(ctx context.Context, f File, w io.Writer) error {
	last := 0
	for last < f.LineCount {
		rows, err := lines(ctx, b.db, f.ID, last, ChunkLines)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		for _, r := range rows {
			if _, err := w.Write(r.Body); err != nil {
				return err
			}
			if r.LineNo < f.LineCount || f.EndsWithNewline {
				if _, err := w.Write([]byte("\n")); err != nil {
					return err
				}
			}
			last = r.LineNo
		}
	}
	return nil
}

// chunkBytes bounds the lines one chunk holds, whatever their number: a chunk ends at the line
// that reaches it.
const chunkBytes = 8 << 20

// lines reads the lines of file id after line after, in order: at most n, and no more once
// they hold chunkBytes.
func lines(ctx context.Context, idb bun.IDB, id string, after, n int) ([]fileLine, error) {
	rows, err := idb.QueryContext(ctx, fileLinesSQL, id, after, n)
	if err != nil {
		return nil, fmt.Errorf("read the lines of file %s after %d: %w", id, after, err)
	}
	defer rows.Close()
	var out []fileLine
	size := 0
	for size < chunkBytes && rows.Next() {
		l := fileLine{FileID: id}
		if err := rows.Scan(&l.LineNo, &l.Body); err != nil {
			return nil, fmt.Errorf("read the lines of file %s after %d: %w", id, after, err)
		}
		size += len(l.Body)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the lines of file %s after %d: %w", id, after, err)
	}
	return out, nil
}
