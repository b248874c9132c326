-- Each budgeted org carries the reservations its jobs hold in two counters: sa_org_budget.reserved
-- sums the estimates of the org's accepted, unfinished (queued or running) jobs, and
-- sa_budget_running.running those of its running ones. A trigger on the jobs keeps both in the
-- transaction that changes a job, so an admission or a start reads its counter in the row it
-- locks, in one statement, however long the backlog; an org without a budget has neither row,
-- and its jobs' trigger updates nothing and locks nothing.
--
-- The counters are rows of their own because each is checked by its own door: an admission
-- locks the budget row and a start the running row, so the submits of a busy org never queue
-- behind its starts, nor its starts behind its submits.
--
-- Only the changes that add a reservation (a job accepted, a job started) update a counter,
-- under its row's lock, as the admission or start that checked it does. A job that gives a
-- reservation back (it finishes, is cancelled, or returns to the queue) appends a release row
-- instead, taking no lock, so the finishes of a busy org never queue behind one another or
-- behind its admissions and starts. A reader subtracts the releases not yet folded; the next
-- change that updates the counter folds them into it, so they stay as few as the releases since
-- the counter's last addition.
CREATE OR REPLACE FUNCTION asterion_budget_reserve() RETURNS trigger LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    org        BIGINT := CASE WHEN TG_OP = 'DELETE' THEN OLD.org_id ELSE NEW.org_id END;
    d_reserved BIGINT := 0;
    d_running  BIGINT := 0;
    folded     BIGINT;
    held       BIGINT;
BEGIN
    IF TG_OP <> 'DELETE' THEN
        IF NEW.state IN ('queued', 'running') THEN d_reserved := NEW.budget_tokens; END IF;
        IF NEW.state = 'running' THEN d_running := NEW.budget_tokens; END IF;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF OLD.state IN ('queued', 'running') THEN d_reserved := d_reserved - OLD.budget_tokens; END IF;
        IF OLD.state = 'running' THEN d_running := d_running - OLD.budget_tokens; END IF;
    END IF;
    -- A job written under a hold of its org (asterion_budget_take) carries the reservation the
    -- hold already made.
    IF TG_OP = 'INSERT' AND d_reserved > 0
       AND strpos(coalesce(current_setting('asterion.budget_held', true), ''), ',' || org || ',') > 0 THEN
        d_reserved := 0;
    END IF;
    IF TG_OP = 'UPDATE' AND d_running > 0 THEN
        DELETE FROM sa_budget_start_hold AS h WHERE h.job_id = NEW.id RETURNING h.tokens INTO held;
        IF FOUND THEN
            d_running := d_running - held;
        END IF;
    END IF;
    -- A counter's lock comes first, then the releases it folds, and the budget row before the
    -- running row: every writer takes them in that order, so two never wait on each other
    -- crosswise.
    IF d_reserved > 0 THEN
        UPDATE sa_org_budget SET reserved = reserved + d_reserved WHERE org_id = org;
        IF FOUND THEN
            WITH rel AS (DELETE FROM sa_budget_release WHERE org_id = org RETURNING reserved)
            SELECT coalesce(sum(reserved), 0) INTO folded FROM rel;
            IF folded <> 0 THEN
                UPDATE sa_org_budget SET reserved = reserved - folded WHERE org_id = org;
            END IF;
        END IF;
    ELSIF d_reserved < 0 AND EXISTS (SELECT 1 FROM sa_org_budget WHERE org_id = org) THEN
        INSERT INTO sa_budget_release (org_id, reserved) VALUES (org, -d_reserved);
    END IF;
    IF d_running > 0 THEN
        UPDATE sa_budget_running SET running = running + d_running WHERE org_id = org;
        IF FOUND THEN
            WITH rel AS (DELETE FROM sa_budget_running_release WHERE org_id = org RETURNING tokens)
            SELECT coalesce(sum(tokens), 0) INTO folded FROM rel;
            IF folded <> 0 THEN
                UPDATE sa_budget_running SET running = running - folded WHERE org_id = org;
            END IF;
        END IF;
    ELSIF d_running < 0 AND EXISTS (SELECT 1 FROM sa_budget_running WHERE org_id = org) THEN
        INSERT INTO sa_budget_running_release (org_id, tokens) VALUES (org, -d_running);
    END IF;
    RETURN NULL;
END;
$$;
