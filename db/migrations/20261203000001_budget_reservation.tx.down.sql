CREATE OR REPLACE FUNCTION asterion_compact_counts() RETURNS void LANGUAGE sql AS $$
WITH d AS (DELETE FROM sa_job_count RETURNING org_id, state, n)
INSERT INTO sa_job_count (org_id, state, n)
SELECT org_id, state, sum(n) FROM d GROUP BY org_id, state HAVING sum(n) <> 0;
WITH d AS (DELETE FROM sa_operation_count RETURNING org_id, status, n)
INSERT INTO sa_operation_count (org_id, status, n)
SELECT org_id, status, sum(n) FROM d GROUP BY org_id, status HAVING sum(n) <> 0;
$$;

CREATE OR REPLACE FUNCTION asterion_count_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.state IS DISTINCT FROM OLD.state) THEN
        INSERT INTO sa_job_count (org_id, state, n) VALUES (NEW.org_id, NEW.state, 1);
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.state IS DISTINCT FROM OLD.state) THEN
        INSERT INTO sa_job_count (org_id, state, n) VALUES (OLD.org_id, OLD.state, -1);
    END IF;
    RETURN NULL;
END;
$$;

ALTER TABLE sa_job_count DROP COLUMN tokens;
ALTER TABLE sa_job DROP COLUMN budget_tokens;
