-- Records what a provider's answer taught about a model: the limits it announced, the pause it
-- asked for (bounded by p_max_pause: a Retry-After, or the token debt of one call, holds the
-- model for at most that many seconds) and whether it refused the call. Like the reservation it
-- commits without waiting for the WAL flush: the row is soft state.
CREATE OR REPLACE FUNCTION asterion_governor_observe(p_model TEXT, p_limit_rpm INTEGER, p_limit_tpm INTEGER,
                                          p_pause DOUBLE PRECISION, p_tpm INTEGER, p_token_debt INTEGER,
                                          p_limited BOOLEAN, p_max_pause DOUBLE PRECISION)
    RETURNS VOID LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    t_now TIMESTAMPTZ := clock_timestamp();
    t_max TIMESTAMPTZ;
    tpm   INTEGER;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    t_max := t_now + make_interval(secs => greatest(p_max_pause, 0));
    INSERT INTO sa_governor (model) VALUES (p_model) ON CONFLICT (model) DO NOTHING;
    SELECT CASE WHEN p_tpm > 0 THEN p_tpm ELSE learned_tpm END INTO tpm FROM sa_governor WHERE model = p_model;
    UPDATE sa_governor SET
        learned_rpm = CASE WHEN p_limit_rpm > 0 THEN p_limit_rpm ELSE learned_rpm END,
        learned_tpm = CASE WHEN p_limit_tpm > 0 THEN p_limit_tpm ELSE learned_tpm END,
        paused_until = CASE WHEN p_pause > 0
                            THEN greatest(least(coalesce(paused_until, t_now), t_max),
                                          least(t_now + make_interval(secs => p_pause), t_max))
                            ELSE paused_until END,
        tok_tat = CASE WHEN tpm > 0 AND p_token_debt <> 0 AND tok_tat > t_now - interval '1 minute'
                       THEN least(tok_tat + make_interval(secs => p_token_debt * 60.0 / tpm), greatest(tok_tat, t_max))
                       ELSE tok_tat END,
        limited = limited + CASE WHEN p_limited THEN 1 ELSE 0 END,
        updated_at = t_now
    WHERE model = p_model;
END $$;

-- The seven-argument form, without the bound on a pause, stays for processes of the previous
-- release until they stop.
CREATE OR REPLACE FUNCTION asterion_governor_observe(p_model TEXT, p_limit_rpm INTEGER, p_limit_tpm INTEGER,
                                          p_pause DOUBLE PRECISION, p_tpm INTEGER, p_token_debt INTEGER,
                                          p_limited BOOLEAN)
    RETURNS VOID LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    t_now TIMESTAMPTZ := clock_timestamp();
    tpm   INTEGER;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
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
