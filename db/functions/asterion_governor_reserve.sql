-- Reserves a call's start on a model's rate limits (a generic cell rate over requests and
-- tokens). Every worker of every process takes a model's row lock at each call start (and, where
-- the provider says something worth recording, at its end in asterion_governor_observe), so the
-- time the lock is held bounds the calls started per second. Three things keep it short:
--
-- * Both functions commit without waiting for the WAL flush (synchronous_commit off for their
--   own transaction). A row lock is released at commit, so with a synchronous commit every
--   reservation waited for its own disk flush while the next one waited for the lock. The row
--   is soft state: a database crash may lose the last fraction of a second of reservations, so
--   a few calls may start early once, and the provider's 429 and its Retry-After pause catch
--   them.
-- * A model with no limit in force and no pause is granted by a plain read of its row, which
--   takes no lock and writes nothing (counted false): the process counts such calls itself and
--   adds them to the row's count about once a second (p_count_by_read false makes every grant
--   count its call in the row, as the six-argument form does). Every worker of every process
--   would otherwise queue on the row's lock for each call with no limit to keep.
-- * asterion_governor_reserve says whether a token limit is in force for the model, so a
--   caller need not record a call's token debt where no token limiter would use it.
CREATE OR REPLACE FUNCTION asterion_governor_reserve(p_model TEXT, p_rpm INTEGER, p_tpm INTEGER, p_tokens INTEGER,
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

-- The six-argument form stays for processes of the previous release until they stop: every
-- grant of it counts its call in the row.
CREATE OR REPLACE FUNCTION asterion_governor_reserve(p_model TEXT, p_rpm INTEGER, p_tpm INTEGER, p_tokens INTEGER,
                                          p_horizon DOUBLE PRECISION, p_burst INTEGER)
    RETURNS TABLE (granted BOOLEAN, slot TIMESTAMPTZ, now_at TIMESTAMPTZ, paused BOOLEAN, metered BOOLEAN)
    LANGUAGE sql AS $$
    SELECT r.granted, r.slot, r.now_at, r.paused, r.metered
    FROM asterion_governor_reserve(p_model, p_rpm, p_tpm, p_tokens, p_horizon, p_burst, false) AS r
$$;
