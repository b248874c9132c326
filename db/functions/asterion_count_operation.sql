-- Counts per org and status, kept by trigger so the dashboard never counts millions of rows. Each
-- change appends delta rows (+1 for the new status, -1 for the old); nothing is ever updated in
-- place, so concurrent writers never wait on, or deadlock over, a counter row. A reader sums;
-- asterion_compact_counts() folds the deltas periodically.
CREATE OR REPLACE FUNCTION asterion_count_operation() RETURNS trigger LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status) THEN
        INSERT INTO sa_operation_count (org_id, status, n) VALUES (NEW.org_id, NEW.status, 1);
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status) THEN
        INSERT INTO sa_operation_count (org_id, status, n) VALUES (OLD.org_id, OLD.status, -1);
    END IF;
    RETURN NULL;
END;
$$;
