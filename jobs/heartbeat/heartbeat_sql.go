package heartbeat

// The heartbeat's statement.

// heartbeatSQL touches the heartbeat of every listed execution still running under its claim,
// records its progress, and returns the jobs it touched; the list comes as one JSON array so
// the text never changes.
const heartbeatSQL = `WITH v AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(id uuid, claim text, chunks integer, tokens integer)
)
UPDATE sa_job j SET running_heartbeat_at = now(), progress_chunks = v.chunks, progress_tokens = v.tokens
FROM v
WHERE j.id = v.id AND j.state = 'running' AND j.worker_claim = v.claim
RETURNING j.id`
