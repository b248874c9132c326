-- Back to one budget row holding both counters, and the functions' earlier versions.
DROP TRIGGER IF EXISTS trg_sa_org_budget_forget ON sa_org_budget;
DROP FUNCTION IF EXISTS asterion_budget_forget();
DROP FUNCTION IF EXISTS asterion_budget_hold(UUID, BIGINT[], BIGINT[], TIMESTAMPTZ);
DROP FUNCTION IF EXISTS asterion_budget_take(UUID);
DROP FUNCTION IF EXISTS asterion_budget_giveback(UUID);
LOCK TABLE sa_job IN SHARE MODE;
ALTER TABLE sa_org_budget ADD COLUMN running BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sa_budget_release ADD COLUMN running BIGINT NOT NULL DEFAULT 0;
UPDATE sa_org_budget AS b SET running = r.running FROM sa_budget_running AS r WHERE r.org_id = b.org_id;
INSERT INTO sa_budget_release (org_id, reserved, running) SELECT org_id, 0, tokens FROM sa_budget_running_release;
DROP TABLE sa_budget_hold;
DROP TABLE sa_budget_running_release;
DROP TABLE sa_budget_running;

CREATE OR REPLACE FUNCTION asterion_budget_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    org        BIGINT := CASE WHEN TG_OP = 'DELETE' THEN OLD.org_id ELSE NEW.org_id END;
    d_reserved BIGINT := 0;
    d_running  BIGINT := 0;
    f_reserved BIGINT;
    f_running  BIGINT;
BEGIN
    IF TG_OP <> 'DELETE' THEN
        IF NEW.state IN ('queued', 'running') THEN d_reserved := NEW.budget_tokens; END IF;
        IF NEW.state = 'running' THEN d_running := NEW.budget_tokens; END IF;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF OLD.state IN ('queued', 'running') THEN d_reserved := d_reserved - OLD.budget_tokens; END IF;
        IF OLD.state = 'running' THEN d_running := d_running - OLD.budget_tokens; END IF;
    END IF;
    IF d_reserved > 0 OR d_running > 0 THEN
        -- The row's lock comes first, then the releases it folds: every folder takes them in
        -- that order, so two never wait on each other crosswise.
        UPDATE sa_org_budget SET reserved = reserved + d_reserved, running = running + d_running WHERE org_id = org;
        IF FOUND THEN
            WITH rel AS (DELETE FROM sa_budget_release WHERE org_id = org RETURNING reserved, running)
            SELECT coalesce(sum(reserved), 0), coalesce(sum(running), 0) INTO f_reserved, f_running FROM rel;
            IF f_reserved <> 0 OR f_running <> 0 THEN
                UPDATE sa_org_budget SET reserved = reserved - f_reserved, running = running - f_running WHERE org_id = org;
            END IF;
        END IF;
    ELSIF (d_reserved < 0 OR d_running < 0) AND EXISTS (SELECT 1 FROM sa_org_budget WHERE org_id = org) THEN
        INSERT INTO sa_budget_release (org_id, reserved, running) VALUES (org, -d_reserved, -d_running);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION asterion_budget_seed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE sa_job IN SHARE MODE;
    DELETE FROM sa_budget_release WHERE org_id = NEW.org_id;
    SELECT coalesce(sum(budget_tokens), 0), coalesce(sum(budget_tokens) FILTER (WHERE state = 'running'), 0)
    INTO NEW.reserved, NEW.running
    FROM sa_job WHERE org_id = NEW.org_id AND state IN ('queued', 'running');
    RETURN NEW;
END;
$$;
