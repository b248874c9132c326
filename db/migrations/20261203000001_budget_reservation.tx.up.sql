-- Budgets are reserved when work is accepted and checked again when it starts. Each job carries
-- its reservation (the estimate of its tokens made when it was admitted), and the job counters
-- carry the sum of the reservations beside the count, kept by the same trigger: an org's
-- accepted, unfinished reservations are then one read of its counter rows, however long its
-- backlog, and they can never drift from the jobs they sum because they change in the
-- transaction that changes the job.
ALTER TABLE sa_job ADD COLUMN budget_tokens INTEGER NOT NULL DEFAULT 0 CHECK (budget_tokens >= 0);
ALTER TABLE sa_job_count ADD COLUMN tokens BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION asterion_count_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.state IS DISTINCT FROM OLD.state) THEN
        INSERT INTO sa_job_count (org_id, state, n, tokens) VALUES (NEW.org_id, NEW.state, 1, NEW.budget_tokens);
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.state IS DISTINCT FROM OLD.state) THEN
        INSERT INTO sa_job_count (org_id, state, n, tokens) VALUES (OLD.org_id, OLD.state, -1, -OLD.budget_tokens);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION asterion_compact_counts() RETURNS void LANGUAGE sql AS $$
WITH d AS (DELETE FROM sa_job_count RETURNING org_id, state, n, tokens)
INSERT INTO sa_job_count (org_id, state, n, tokens)
SELECT org_id, state, sum(n), sum(tokens) FROM d GROUP BY org_id, state HAVING sum(n) <> 0 OR sum(tokens) <> 0;
WITH d AS (DELETE FROM sa_operation_count RETURNING org_id, status, n)
INSERT INTO sa_operation_count (org_id, status, n)
SELECT org_id, status, sum(n) FROM d GROUP BY org_id, status HAVING sum(n) <> 0;
$$;
