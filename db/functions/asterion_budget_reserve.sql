-- Each budget row carries the reservations its org's jobs hold: reserved sums the estimates of
-- the org's accepted, unfinished (queued or running) jobs and running those of its running ones.
-- A trigger on the jobs keeps both in the transaction that changes a job, so an admission or a
-- start reads them in the budget row it locks, in one statement, however long the backlog; an
-- org without a budget has no row, and its jobs' trigger updates nothing and locks nothing.
--
-- Only the changes that add a reservation (a job accepted, a job started) update the row, under
-- its lock, as the admission or start that checked it does. A job that gives its reservation
-- back (it finishes, is cancelled, or returns to the queue) appends a release row instead,
-- taking no lock, so the finishes of a busy org never queue behind one another or behind its
-- starts on the budget row. A reader subtracts the releases not yet folded; the next change
-- that updates the row folds them into it, so they stay as few as the releases since the org's
-- last accept or start.
CREATE OR REPLACE FUNCTION asterion_budget_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    org        BIGINT := CASE WHEN TG_OP = 'DELETE' THEN OLD.org_id ELSE NEW.org_id END;
    d_reserved BIGINT := 0;
    d_running  BIGINT := 0;
    f_reserved BIGINT;
    f_running  BIGINT;
BEGIN
    IF TG_OP <> 'DELETE' THEN
        IF NEW.state IN ('queued', 'running') THEN d_reserved := NEW.budget_tokens; END IF;
        IF NEW.state = 'running' THEN d_running := NEW.budget_tokens; END IF;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF OLD.state IN ('queued', 'running') THEN d_reserved := d_reserved - OLD.budget_tokens; END IF;
        IF OLD.state = 'running' THEN d_running := d_running - OLD.budget_tokens; END IF;
    END IF;
    IF d_reserved > 0 OR d_running > 0 THEN
        -- The row's lock comes first, then the releases it folds: every folder takes them in
        -- that order, so two never wait on each other crosswise.
        UPDATE sa_org_budget SET reserved = reserved + d_reserved, running = running + d_running WHERE org_id = org;
        IF FOUND THEN
            WITH rel AS (DELETE FROM sa_budget_release WHERE org_id = org RETURNING reserved, running)
            SELECT coalesce(sum(reserved), 0), coalesce(sum(running), 0) INTO f_reserved, f_running FROM rel;
            IF f_reserved <> 0 OR f_running <> 0 THEN
                UPDATE sa_org_budget SET reserved = reserved - f_reserved, running = running - f_running WHERE org_id = org;
            END IF;
        END IF;
    ELSIF (d_reserved < 0 OR d_running < 0) AND EXISTS (SELECT 1 FROM sa_org_budget WHERE org_id = org) THEN
        INSERT INTO sa_budget_release (org_id, reserved, running) VALUES (org, -d_reserved, -d_running);
    END IF;
    RETURN NULL;
END;
$$;
