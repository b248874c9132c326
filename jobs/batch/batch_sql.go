package batch

// The batches' statements that bun's builder would not say plainly. They run through bun.IDB
// (bun's ? placeholders).
const (
	// countsSQL counts a batch's lines by how they stand: a line whose job succeeded is completed;
	// a line that became no job, or whose job ended otherwise (or is gone), failed.
	countsSQL = `SELECT
	count(*) FILTER (WHERE j.state = 'succeeded') AS completed,
	count(*) FILTER (WHERE r.job_id IS NULL OR j.id IS NULL OR j.state IN ('failed', 'cancelled', 'superseded')) AS failed,
	count(*) FILTER (WHERE j.state IN ('queued', 'running')) AS unfinished
FROM sa_batch_request r LEFT JOIN sa_job j ON j.id = r.job_id WHERE r.batch_id = ?`

	// outcomeSQL reads ChunkLines lines of a batch after a line number, each with what its job
	// answered: the job's state and error, the response's text, the model it ran on, its usage
	// (the sum over its attempts) and the output tokens of the attempt that answered.
	outcomeSQL = `SELECT r.line_no, r.custom_id, r.job_id, r.error_code, r.error_message,
	j.state, j.error_kind, j.error_message, coalesce(j.finished_at, j.updated_at), j.execution_options, e.body,
	coalesce(u.input_tokens, 0), coalesce(u.output_tokens, 0), coalesce(u.answered_output, 0)
FROM sa_batch_request r
LEFT JOIN sa_job j ON j.id = r.job_id
LEFT JOIN sa_entity e ON e.id = j.response_id
LEFT JOIN LATERAL (SELECT sum(a.input_tokens) AS input_tokens, sum(a.output_tokens) AS output_tokens,
	(array_agg(a.output_tokens ORDER BY a.attempt DESC) FILTER (WHERE a.error_kind IS NULL))[1] AS answered_output
	FROM sa_attempt a WHERE a.job_id = r.job_id) u ON true
WHERE r.batch_id = ? AND r.line_no > ?
ORDER BY r.line_no LIMIT ?`

	// fileLinesSQL reads at most n lines of a file after a line number, in order.
	fileLinesSQL = `SELECT line_no, body FROM sa_file_line WHERE file_id = ? AND line_no > ? ORDER BY line_no LIMIT ?`
)
