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
--
-- A process of this version sends its starts together, through asterion_budget_start_holds,
-- which applies this rule to each; this form of one start, the same rule for one, stays for the
-- processes of the version before it while a rolling deploy replaces them.
CREATE OR REPLACE FUNCTION asterion_budget_start_hold(hold UUID, job UUID, at_time TIMESTAMPTZ)
RETURNS TABLE (outcome TEXT, budget BIGINT, period TEXT, used BIGINT, running BIGINT)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT h.outcome, h.budget, h.period, h.used, h.running
        FROM asterion_budget_start_holds(ARRAY[hold], ARRAY[job], at_time) AS h;
END;
$$;
