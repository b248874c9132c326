-- Folds the counter deltas of sa_job_count and sa_operation_count into one row per key. Safe
-- beside concurrent writers: it deletes only the rows its snapshot sees and re-inserts their sum.
CREATE OR REPLACE FUNCTION asterion_compact_counts() RETURNS void LANGUAGE sql AS $$
WITH d AS (DELETE FROM sa_job_count RETURNING org_id, state, n, tokens)
INSERT INTO sa_job_count (org_id, state, n, tokens)
SELECT org_id, state, sum(n), sum(tokens) FROM d GROUP BY org_id, state HAVING sum(n) <> 0 OR sum(tokens) <> 0;
WITH d AS (DELETE FROM sa_operation_count RETURNING org_id, status, n)
INSERT INTO sa_operation_count (org_id, status, n)
SELECT org_id, status, sum(n) FROM d GROUP BY org_id, status HAVING sum(n) <> 0;
$$;
