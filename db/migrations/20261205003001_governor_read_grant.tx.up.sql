-- The governor grants a call on a model with no limit in force and no pause by a plain read of
-- the model's row instead of an UPDATE under its lock; the process counts those calls and adds
-- them to the row's count about once a second. asterion_governor_reserve gains a seventh
-- argument (whether such a grant may go by a read) and a sixth column (whether the call was
-- counted in the row). The six-argument function stays for processes of the previous release
-- until they stop (db/functions makes it call this one).
CREATE FUNCTION asterion_governor_reserve(p_model TEXT, p_rpm INTEGER, p_tpm INTEGER, p_tokens INTEGER,
                                          p_horizon DOUBLE PRECISION, p_burst INTEGER, p_count_by_read BOOLEAN)
    RETURNS TABLE (granted BOOLEAN, slot TIMESTAMPTZ, now_at TIMESTAMPTZ, paused BOOLEAN, metered BOOLEAN, counted BOOLEAN)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    g     sa_governor%ROWTYPE;
    t_now TIMESTAMPTZ;
    rpm   INTEGER;
    tpm   INTEGER;
    t_req DOUBLE PRECISION := 0;
    t_tok DOUBLE PRECISION := 0;
    s     TIMESTAMPTZ;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF p_rpm <= 0 AND p_tpm <= 0 AND p_count_by_read THEN
        t_now := clock_timestamp();
        PERFORM 1 FROM sa_governor
        WHERE model = p_model AND NOT operator_paused AND learned_rpm = 0 AND learned_tpm = 0
          AND (paused_until IS NULL OR paused_until <= t_now);
        IF FOUND THEN
            RETURN QUERY SELECT true, t_now, t_now, false, false, false;
            RETURN;
        END IF;
    END IF;
    SELECT * INTO g FROM sa_governor WHERE model = p_model FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO sa_governor (model) VALUES (p_model) ON CONFLICT (model) DO NOTHING;
        SELECT * INTO g FROM sa_governor WHERE model = p_model FOR UPDATE;
    END IF;
    t_now := clock_timestamp();
    rpm := CASE WHEN p_rpm > 0 THEN p_rpm ELSE g.learned_rpm END;
    tpm := CASE WHEN p_tpm > 0 THEN p_tpm ELSE g.learned_tpm END;
    IF g.operator_paused THEN
        RETURN QUERY SELECT false, NULL::TIMESTAMPTZ, t_now, true, tpm > 0, false;
        RETURN;
    END IF;
    s := greatest(t_now, g.paused_until);
    IF rpm > 0 THEN
        t_req := 60.0 / rpm;
        s := greatest(s, g.req_tat - make_interval(secs => (p_burst - 1) * t_req));
    END IF;
    IF tpm > 0 THEN
        t_tok := 60.0 / tpm;
        s := greatest(s, g.tok_tat - interval '10 seconds');
    END IF;
    IF s > t_now + make_interval(secs => p_horizon) THEN
        RETURN QUERY SELECT false, s, t_now, false, tpm > 0, false;
        RETURN;
    END IF;
    UPDATE sa_governor SET
        req_tat = CASE WHEN rpm > 0 THEN greatest(req_tat, s) + make_interval(secs => t_req) ELSE req_tat END,
        tok_tat = CASE WHEN tpm > 0 THEN greatest(tok_tat, s) + make_interval(secs => p_tokens * t_tok) ELSE tok_tat END,
        calls = calls + 1,
        updated_at = t_now
    WHERE model = p_model;
    RETURN QUERY SELECT true, s, t_now, false, tpm > 0, true;
END $$;
