-- A start hold whose start did not happen gives its tokens back as a release row, taking no
-- lock. Only the hold named hold of job is given back: a start that did happen took it (its
-- change to running deleted the row), and another start's hold of the same job is not this one.
CREATE OR REPLACE FUNCTION asterion_budget_start_giveback(job UUID, hold UUID) RETURNS void LANGUAGE sql AS $$
    WITH h AS (DELETE FROM sa_budget_start_hold WHERE job_id = job AND id = hold RETURNING org_id, tokens)
    INSERT INTO sa_budget_running_release (org_id, tokens) SELECT org_id, tokens FROM h;
$$;
