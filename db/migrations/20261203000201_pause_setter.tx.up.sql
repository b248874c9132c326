-- Pauses are bounded, and say who set them.
--
-- * An operator's pause of a model (sa_governor) or of an org (sa_org_share) records who set it:
--   the user (NULL for the command line), the role it acted in and the actor's name as the
--   audit trail writes it, so the health page can show it and only an equal or higher role can
--   lift it. A provider's pause (paused_until) is always the provider's and needs no column.
-- * asterion_governor_observe gains the longest pause one provider answer may cause: its
--   Retry-After (or exhausted limit) and the token debt of one call each hold the model for at
--   most p_max_pause seconds. The seven-argument function stays for processes of the previous
--   release until they stop.
-- * A pause recorded before pauses were bounded ends within the default bound (five minutes).
ALTER TABLE sa_governor
    ADD COLUMN paused_by    BIGINT NULL REFERENCES users (id) ON DELETE SET NULL,
    ADD COLUMN paused_role  VARCHAR(16) NULL CHECK (paused_role IN ('operator', 'admin')),
    ADD COLUMN paused_actor TEXT NULL;

ALTER TABLE sa_org_share
    ADD COLUMN paused_by    BIGINT NULL REFERENCES users (id) ON DELETE SET NULL,
    ADD COLUMN paused_role  VARCHAR(16) NULL CHECK (paused_role IN ('operator', 'admin')),
    ADD COLUMN paused_actor TEXT NULL;

UPDATE sa_governor SET paused_until = now() + interval '5 minutes' WHERE paused_until > now() + interval '5 minutes';
UPDATE sa_governor SET tok_tat = now() + interval '5 minutes' WHERE tok_tat > now() + interval '5 minutes';

CREATE FUNCTION asterion_governor_observe(p_model TEXT, p_limit_rpm INTEGER, p_limit_tpm INTEGER,
                                          p_pause DOUBLE PRECISION, p_tpm INTEGER, p_token_debt INTEGER,
                                          p_limited BOOLEAN, p_max_pause DOUBLE PRECISION)
    RETURNS VOID LANGUAGE plpgsql AS $$
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
