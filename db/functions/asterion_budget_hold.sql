-- A hold is an admission's reservation taken ahead of the transaction that writes its jobs. The
-- submit path admits a group of submits by holding their estimates against each org's budget in
-- a statement of its own, committed without waiting for the disk flush, and then writes the
-- jobs in a transaction that takes the hold (asterion_budget_take): the budget row is locked
-- only for this one statement, never across the writing of the jobs or a durable commit, so the
-- submits of one busy org do not go one transaction at a time. A hold that is never taken (its
-- transaction failed: asterion_budget_giveback; its process died: swept here, once older than
-- any submit can live) gives its tokens back.
--
-- For each org with a budget, in org order, the requests of that org (orgs[i], tokens[i], in
-- request order) are granted while the period's usage plus the org's reservations is below the
-- budget, each adding its estimate: the same rule as a locked admission's. It returns, per
-- budgeted org, how many of its requests (the first ones) were granted, and the budget, usage
-- and reservations a refused request saw. An org without a budget is not returned: its requests
-- are granted and hold nothing. The commit need not be durable: a hold lost in a database crash
-- takes its transaction with it (that transaction's commit, being durable, comes later in the
-- log), and a hold that survives one whose transaction did not is given back as above.
CREATE OR REPLACE FUNCTION asterion_budget_hold(hold UUID, orgs BIGINT[], tokens BIGINT[], at_time TIMESTAMPTZ)
RETURNS TABLE (org_id BIGINT, granted INT, budget BIGINT, period TEXT, used BIGINT, reserved BIGINT)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    org    BIGINT;
    b      sa_org_budget%ROWTYPE;
    folded BIGINT;
    swept  BIGINT;
    r      BIGINT;
    u      BIGINT;
    n      INT;
    held   BIGINT;
    t      BIGINT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR org IN SELECT DISTINCT o FROM unnest(orgs) AS o ORDER BY o LOOP
        SELECT * INTO b FROM sa_org_budget AS x WHERE x.org_id = org FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        WITH rel AS (DELETE FROM sa_budget_release AS x WHERE x.org_id = org RETURNING x.reserved)
        SELECT coalesce(sum(rel.reserved), 0) INTO folded FROM rel;
        WITH old AS (DELETE FROM sa_budget_hold AS h WHERE h.org_id = org AND h.created_at < now() - interval '10 minutes'
                     RETURNING h.tokens)
        SELECT coalesce(sum(old.tokens), 0) INTO swept FROM old;
        SELECT coalesce(sum(p.tokens), 0) INTO u FROM sa_usage_period AS p
        WHERE p.org_id = org AND p.period = b.period AND p.period_start = date_trunc(b.period, at_time, 'UTC');
        r := b.reserved - folded - swept;
        n := 0;
        held := 0;
        FOR t IN SELECT x.t FROM unnest(orgs, tokens) WITH ORDINALITY AS x(o, t, i) WHERE x.o = org ORDER BY x.i LOOP
            EXIT WHEN u + r >= b.tokens;
            r := r + t;
            held := held + t;
            n := n + 1;
        END LOOP;
        UPDATE sa_org_budget AS x SET reserved = r WHERE x.org_id = org;
        IF held > 0 THEN
            INSERT INTO sa_budget_hold (id, org_id, tokens) VALUES (hold, org, held);
        END IF;
        org_id := org; granted := n; budget := b.tokens; period := b.period; used := u; reserved := r;
        RETURN NEXT;
    END LOOP;
END;
$$;
