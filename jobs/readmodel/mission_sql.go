package readmodel

// The mission views' statements: the field of prompts, the versions of the ones shown, and the
// watermark below which no change can still appear. missionFieldSQL runs through bun's NewRaw
// (bun's ?N placeholders); missionVersionsSQL on database/sql ($N), and the watermark on both
// (db.Numbered numbers it for database/sql).
const (
	// missionFieldSQL reads the newest ?5 prompts of org ?0 and user ?1 (every job of a prompt has
	// its prompt's org and creator) walking idx_entity_prompts newest first, each with its
	// newest job, that job's response and the superseded jobs of the prompt, texts cut to ?2 + 1
	// characters (one more than shown, to tell a cut text), read from body_head when the body is
	// longer than that head's 1000, so that no long body is fetched. With ?3 true only prompts with
	// a job updated at or after ?4 count, and with ?6 not null only the prompts in it. The nested
	// loop stops at the limit: the read is the same for a user with 200 prompts or 100,000.
	missionFieldSQL = `
SELECT p.id AS prompt_id, p.parent_id, left(coalesce(p.body_head, p.body), ?2 + 1) AS prompt_body, p.created_at AS prompt_created_at,
    p.org_id AS prompt_org_id, p.created_by AS prompt_created_by,
    j.id AS job_id, j.state, j.priority, j.attempt, j.max_attempts, j.error_kind, j.error_message, j.supersedes,
    j.response_id, j.operation_id, j.created_at AS job_created_at, j.updated_at AS job_updated_at,
    left(coalesce(r.body_head, r.body), ?2 + 1) AS response_body, r.created_at AS response_created_at,
    h.superseded
FROM sa_entity AS p
JOIN LATERAL (
    SELECT x.id, x.state, x.priority, x.attempt, x.max_attempts, x.error_kind, x.error_message, x.supersedes, x.response_id,
        x.operation_id, x.created_at, x.updated_at
    FROM sa_job AS x WHERE x.prompt_id = p.id AND x.org_id = p.org_id AND x.created_by = p.created_by
    ORDER BY x.created_at DESC, x.id DESC LIMIT 1
) AS j ON true
LEFT JOIN sa_entity AS r ON r.id = j.response_id
LEFT JOIN LATERAL (
    SELECT json_agg(json_build_object('id', s.id, 'attempt', s.attempt, 'error_kind', s.error_kind, 'updated_at', s.updated_at)
        ORDER BY s.created_at, s.id) AS superseded
    FROM sa_job AS s WHERE s.prompt_id = p.id AND s.state = 'superseded'
) AS h ON true
WHERE p.org_id = ?0 AND p.created_by = ?1 AND p.kind = 'prompt'
    AND (NOT ?3 OR EXISTS (SELECT 1 FROM sa_job AS c WHERE c.prompt_id = p.id AND c.updated_at >= ?4))
    AND (?6::uuid[] IS NULL OR p.id = ANY (?6::uuid[]))
ORDER BY p.created_at DESC, p.id DESC
LIMIT ?5`

	// changeWatermarkSQL is the as_of of a mission read: now, or the start of the oldest
	// transaction still open when it runs, whichever is earlier (see MissionRecent).
	changeWatermarkSQL = `SELECT LEAST(clock_timestamp(), COALESCE((
	SELECT min(xact_start) FROM pg_stat_activity
	WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
	  AND backend_type = ?), 'infinity'))`

	// missionVersionsSQL is missionFieldSQL narrowed to the prompt's id and its newest job's id,
	// state and updated_at: the same newest $3 prompts of org $1 and user $2, with no text, no
	// response and no superseded jobs. It runs with parameters, so the connection keeps it
	// prepared and PostgreSQL plans it once per connection instead of on every reload; updated_at
	// comes as microseconds since the epoch, which a reload reads back much faster than a
	// timestamp's text.
	missionVersionsSQL = `
SELECT p.id, j.id, j.state, (extract(epoch FROM j.updated_at) * 1000000)::bigint
FROM sa_entity AS p
JOIN LATERAL (
    SELECT x.id, x.state, x.updated_at
    FROM sa_job AS x WHERE x.prompt_id = p.id AND x.org_id = p.org_id AND x.created_by = p.created_by
    ORDER BY x.created_at DESC, x.id DESC LIMIT 1
) AS j ON true
WHERE p.org_id = $1 AND p.created_by = $2 AND p.kind = 'prompt'
ORDER BY p.created_at DESC, p.id DESC
LIMIT $3`
)
