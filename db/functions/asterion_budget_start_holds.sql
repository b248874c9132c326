-- The start holds of many starts at once: asterion_budget_start_hold's rule and answers, for
-- jobs[i] under the name holds[i], each org's counter locked once for all of its starts. A
-- process sends the starts its workers ask for while its previous statement runs together in
-- one, so the starts of a busy org take the counter's lock once per statement rather than once
-- per start, and wait behind the other processes' statements only.
--
-- Each org's starts are judged in the order given, one after the other, as separate statements
-- would judge them: once the usage plus the running reservations reach the budget, the rest
-- are 'full'. The orgs' counters are locked in the order of their ids, as every other
-- statement that locks more than one does, so two never wait on each other crosswise. A job not
-- queued has no row.
--
-- The batch's jobs are read once, by their primary key alone, and judged from that read. With
-- state = 'queued' beside the ids in a read of sa_job, the planner may walk a partial index of
-- every queued job and filter it by id: statistics taken while the queue was empty make those
-- indexes look tiny, and each such read then walks the whole backlog. The fence (OFFSET 0)
-- keeps the state's condition out of the read of the rows.
CREATE OR REPLACE FUNCTION asterion_budget_start_holds(holds UUID[], jobs UUID[], at_time TIMESTAMPTZ)
RETURNS TABLE (job UUID, outcome TEXT, budget BIGINT, period TEXT, used BIGINT, running BIGINT)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    org     BIGINT;
    r       BIGINT;
    b       sa_org_budget%ROWTYPE;
    folded  BIGINT;
    swept   BIGINT;
    u       BIGINT;
    changed BOOLEAN;
    q_jobs   UUID[];
    q_holds  UUID[];
    q_orgs   BIGINT[];
    q_tokens BIGINT[];
    i        INT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT array_agg(t.job_id ORDER BY t.n), array_agg(t.hold_id ORDER BY t.n),
           array_agg(j.org_id ORDER BY t.n), array_agg(j.budget_tokens ORDER BY t.n)
        INTO q_jobs, q_holds, q_orgs, q_tokens
        FROM unnest(jobs, holds) WITH ORDINALITY AS t(job_id, hold_id, n)
        JOIN (SELECT x.id, x.org_id, x.state, x.budget_tokens FROM sa_job AS x WHERE x.id = ANY (jobs) OFFSET 0) AS j
            ON j.id = t.job_id
        WHERE j.state = 'queued';
    IF q_jobs IS NULL THEN
        RETURN;
    END IF;
    FOR org IN SELECT DISTINCT o FROM unnest(q_orgs) AS o ORDER BY 1 LOOP
        SELECT x.running INTO r FROM sa_budget_running AS x WHERE x.org_id = org FOR UPDATE;
        IF FOUND THEN
            SELECT * INTO b FROM sa_org_budget AS x WHERE x.org_id = org;
        END IF;
        IF NOT FOUND THEN
            RETURN QUERY SELECT t.job_id, 'unbudgeted'::TEXT, 0::BIGINT, ''::TEXT, 0::BIGINT, 0::BIGINT
                FROM unnest(q_jobs, q_orgs) AS t(job_id, org_id) WHERE t.org_id = org;
            CONTINUE;
        END IF;
        WITH rel AS (DELETE FROM sa_budget_running_release AS x WHERE x.org_id = org RETURNING x.tokens)
        SELECT coalesce(sum(rel.tokens), 0) INTO folded FROM rel;
        WITH old AS (DELETE FROM sa_budget_start_hold AS h WHERE h.org_id = org AND h.created_at < now() - interval '10 minutes'
                     RETURNING h.tokens)
        SELECT coalesce(sum(old.tokens), 0) INTO swept FROM old;
        SELECT coalesce(sum(p.tokens), 0) INTO u FROM sa_usage_period AS p
        WHERE p.org_id = org AND p.period = b.period AND p.period_start = date_trunc(b.period, at_time, 'UTC');
        r := r - folded - swept;
        changed := folded <> 0 OR swept <> 0;
        FOR i IN 1 .. cardinality(q_jobs) LOOP
            CONTINUE WHEN q_orgs[i] <> org;
            IF u + r >= b.tokens THEN
                outcome := 'full';
            ELSE
                INSERT INTO sa_budget_start_hold (job_id, id, org_id, tokens) VALUES (q_jobs[i], q_holds[i], org, q_tokens[i])
                ON CONFLICT (job_id) DO NOTHING;
                IF FOUND THEN
                    r := r + q_tokens[i];
                    changed := true;
                    outcome := 'held';
                ELSE
                    outcome := 'other';
                END IF;
            END IF;
            job := q_jobs[i]; budget := b.tokens; period := b.period; used := u; running := r;
            RETURN NEXT;
        END LOOP;
        IF changed THEN
            UPDATE sa_budget_running AS x SET running = r WHERE x.org_id = org;
        END IF;
    END LOOP;
END;
$$;
