-- A start hold is a start's running reservation taken ahead of the transaction that starts the
-- job. A start checked inside its own transaction keeps its org's running counter locked until
-- that transaction commits, so the starts of one busy org go one transaction at a time; held
-- here, the counter is locked only for this one statement, committed without waiting for the
-- disk, and the change that moves the job to running takes the hold (asterion_budget_reserve)
-- instead of adding to the counter again. A hold whose start did not happen is given back
-- (asterion_budget_start_giveback); one whose process died is swept here, once older than any
-- start can live, unless a later start of its job takes it first.
--
-- The rule is a locked start's: the job may start while the period's usage plus the
-- reservations of the org's running jobs (held starts included) is below the budget. It answers
-- no row when the job is not queued, and otherwise one row: outcome 'held' (the job's estimate
-- is held under the name hold), 'full' (no room: the job waits), 'unbudgeted' (the org has no
-- budget) or 'other' (a hold of this job's start already exists, which the start takes), with
-- the budget, usage and running reservations it saw. Unless a start is held, it checks the
-- budget in its own statement, under the counter's lock. A hold lost in a database crash
-- takes its start with it: the start's commit comes later in the log.
CREATE OR REPLACE FUNCTION asterion_budget_start_hold(hold UUID, job UUID, at_time TIMESTAMPTZ)
RETURNS TABLE (outcome TEXT, budget BIGINT, period TEXT, used BIGINT, running BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    org    BIGINT;
    t      BIGINT;
    r      BIGINT;
    b      sa_org_budget%ROWTYPE;
    folded BIGINT;
    swept  BIGINT;
    u      BIGINT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT j.org_id, j.budget_tokens INTO org, t FROM sa_job AS j WHERE j.id = job AND j.state = 'queued';
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT x.running INTO r FROM sa_budget_running AS x WHERE x.org_id = org FOR UPDATE;
    IF FOUND THEN
        SELECT * INTO b FROM sa_org_budget AS x WHERE x.org_id = org;
    END IF;
    IF NOT FOUND THEN
        outcome := 'unbudgeted'; budget := 0; period := ''; used := 0; running := 0;
        RETURN NEXT;
        RETURN;
    END IF;
    WITH rel AS (DELETE FROM sa_budget_running_release AS x WHERE x.org_id = org RETURNING x.tokens)
    SELECT coalesce(sum(rel.tokens), 0) INTO folded FROM rel;
    WITH old AS (DELETE FROM sa_budget_start_hold AS h WHERE h.org_id = org AND h.created_at < now() - interval '10 minutes'
                 RETURNING h.tokens)
    SELECT coalesce(sum(old.tokens), 0) INTO swept FROM old;
    SELECT coalesce(sum(p.tokens), 0) INTO u FROM sa_usage_period AS p
    WHERE p.org_id = org AND p.period = b.period AND p.period_start = date_trunc(b.period, at_time, 'UTC');
    r := r - folded - swept;
    IF u + r >= b.tokens THEN
        outcome := 'full';
    ELSE
        INSERT INTO sa_budget_start_hold (job_id, id, org_id, tokens) VALUES (job, hold, org, t)
        ON CONFLICT (job_id) DO NOTHING;
        IF FOUND THEN
            r := r + t;
            outcome := 'held';
        ELSE
            outcome := 'other';
        END IF;
    END IF;
    IF folded <> 0 OR swept <> 0 OR outcome = 'held' THEN
        UPDATE sa_budget_running AS x SET running = r WHERE x.org_id = org;
    END IF;
    budget := b.tokens; period := b.period; used := u; running := r;
    RETURN NEXT;
END;
$$;
