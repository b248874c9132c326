package db

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// OutputKey names one attempt of a job, whose output is read.
type OutputKey struct {
	JobID   uuid.UUID `json:"job_id"`
	Attempt int       `json:"attempt"`
}

// OutputHead is the beginning of one attempt's output: its text up to a number of characters,
// and the seq of the last chunk that text holds.
type OutputHead struct {
	OutputKey
	Text string
	// LastSeq is the seq of the last chunk in Text (all of it, unless Cut).
	LastSeq int
	// Cut is true when the attempt wrote more than Text holds.
	Cut bool
}

// outputHeadsSQL reads the output heads of many attempts (the JSON array $1 of
// {job_id, attempt}) in one statement: for each, the chunks that start within the first $2
// characters, concatenated in seq order, with the last seq among them. Chunks past the head
// are only counted, never returned.
const outputHeadsSQL = `WITH k AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS k(job_id uuid, attempt smallint)
), x AS (
    SELECT o.job_id, o.attempt, o.seq, o.text,
        sum(length(o.text)) OVER (PARTITION BY o.job_id, o.attempt ORDER BY o.seq) - length(o.text) AS before
    FROM k JOIN sa_job_output o ON o.job_id = k.job_id AND o.attempt = k.attempt
)
SELECT job_id, attempt, max(seq), string_agg(text, '' ORDER BY seq)
FROM x WHERE before <= $2
GROUP BY job_id, attempt`

// OutputHeads returns, for each key with some output, its first maxChars characters and the
// last seq they hold, in one statement whatever the number of keys.
func OutputHeads(ctx context.Context, idb bun.IDB, keys []OutputKey, maxChars int) (map[OutputKey]OutputHead, error) {
	out := make(map[OutputKey]OutputHead, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	payload, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("encode %d output keys: %w", len(keys), err)
	}
	rows, err := rawQuery(ctx, idb, outputHeadsSQL, string(payload), maxChars)
	if err != nil {
		return nil, fmt.Errorf("read the output of %d jobs: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var h OutputHead
		if err := rows.Scan(&h.JobID, &h.Attempt, &h.LastSeq, &h.Text); err != nil {
			return nil, fmt.Errorf("scan output head: %w", err)
		}
		h.Text, h.Cut = CutRunes(h.Text, maxChars)
		out[h.OutputKey] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the output of %d jobs: %w", len(keys), err)
	}
	return out, nil
}

// CutRunes returns the first n characters of s and whether s had more.
func CutRunes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false // fewer bytes than n: fewer characters too
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], true
		}
		i++
	}
	return s, false
}
