-- Counts per org and state, kept by trigger so the dashboard never counts millions of rows. Each
-- change appends delta rows (+1 for the new state, -1 for the old, with the job's budget
-- reservation beside the count); nothing is ever updated in place, so concurrent writers never
-- wait on, or deadlock over, a counter row. A reader sums; asterion_compact_counts() folds the
-- deltas periodically.
CREATE OR REPLACE FUNCTION asterion_count_job() RETURNS trigger LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
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
