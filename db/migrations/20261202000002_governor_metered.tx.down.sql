DROP FUNCTION asterion_governor_reserve(TEXT, INTEGER, INTEGER, INTEGER, DOUBLE PRECISION, INTEGER);

CREATE FUNCTION asterion_governor_reserve(p_model TEXT, p_rpm INTEGER, p_tpm INTEGER, p_tokens INTEGER,
                                          p_horizon DOUBLE PRECISION, p_burst INTEGER)
    RETURNS TABLE (granted BOOLEAN, slot TIMESTAMPTZ, now_at TIMESTAMPTZ, paused BOOLEAN)
    LANGUAGE plpgsql AS $$
DECLARE
    g     sa_governor%ROWTYPE;
    t_now TIMESTAMPTZ;
    rpm   INTEGER;
    tpm   INTEGER;
    t_req DOUBLE PRECISION := 0;
    t_tok DOUBLE PRECISION := 0;
    s     TIMESTAMPTZ;
BEGIN
    SELECT * INTO g FROM sa_governor WHERE model = p_model FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO sa_governor (model) VALUES (p_model) ON CONFLICT (model) DO NOTHING;
        SELECT * INTO g FROM sa_governor WHERE model = p_model FOR UPDATE;
    END IF;
    t_now := clock_timestamp();
    IF g.operator_paused THEN
        RETURN QUERY SELECT false, NULL::TIMESTAMPTZ, t_now, true;
        RETURN;
    END IF;
    rpm := CASE WHEN p_rpm > 0 THEN p_rpm ELSE g.learned_rpm END;
    tpm := CASE WHEN p_tpm > 0 THEN p_tpm ELSE g.learned_tpm END;
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
        RETURN QUERY SELECT false, s, t_now, false;
        RETURN;
    END IF;
    UPDATE sa_governor SET
        req_tat = CASE WHEN rpm > 0 THEN greatest(req_tat, s) + make_interval(secs => t_req) ELSE req_tat END,
        tok_tat = CASE WHEN tpm > 0 THEN greatest(tok_tat, s) + make_interval(secs => p_tokens * t_tok) ELSE tok_tat END,
        calls = calls + 1,
        updated_at = t_now
    WHERE model = p_model;
    RETURN QUERY SELECT true, s, t_now, false;
END $$;

CREATE OR REPLACE FUNCTION asterion_governor_observe(p_model TEXT, p_limit_rpm INTEGER, p_limit_tpm INTEGER,
                                          p_pause DOUBLE PRECISION, p_tpm INTEGER, p_token_debt INTEGER,
                                          p_limited BOOLEAN)
    RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    t_now TIMESTAMPTZ := clock_timestamp();
    tpm   INTEGER;
BEGIN
    INSERT INTO sa_governor (model) VALUES (p_model) ON CONFLICT (model) DO NOTHING;
    SELECT CASE WHEN p_tpm > 0 THEN p_tpm ELSE learned_tpm END INTO tpm FROM sa_governor WHERE model = p_model;
    UPDATE sa_governor SET
        learned_rpm = CASE WHEN p_limit_rpm > 0 THEN p_limit_rpm ELSE learned_rpm END,
        learned_tpm = CASE WHEN p_limit_tpm > 0 THEN p_limit_tpm ELSE learned_tpm END,
        paused_until = CASE WHEN p_pause > 0 THEN greatest(paused_until, t_now + make_interval(secs => p_pause))
                            ELSE paused_until END,
        tok_tat = CASE WHEN tpm > 0 AND p_token_debt <> 0 AND tok_tat > t_now - interval '1 minute'
                       THEN tok_tat + make_interval(secs => p_token_debt * 60.0 / tpm) ELSE tok_tat END,
        limited = limited + CASE WHEN p_limited THEN 1 ELSE 0 END,
        updated_at = t_now
    WHERE model = p_model;
END $$;
