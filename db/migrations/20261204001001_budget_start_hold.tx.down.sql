-- Back to starts that check the budget under the running counter's lock in their own
-- transaction. A hold not yet taken is folded back into nothing: its tokens leave the counter.
DROP FUNCTION IF EXISTS asterion_budget_start_hold(UUID, UUID, TIMESTAMPTZ);
DROP FUNCTION IF EXISTS asterion_budget_start_holds(UUID[], UUID[], TIMESTAMPTZ);
DROP FUNCTION IF EXISTS asterion_budget_start_giveback(UUID, UUID);
LOCK TABLE sa_job IN SHARE MODE;
INSERT INTO sa_budget_running_release (org_id, tokens) SELECT org_id, tokens FROM sa_budget_start_hold;
DROP TABLE sa_budget_start_hold;

-- The trigger functions' versions before start holds.
CREATE OR REPLACE FUNCTION asterion_budget_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    org        BIGINT := CASE WHEN TG_OP = 'DELETE' THEN OLD.org_id ELSE NEW.org_id END;
    d_reserved BIGINT := 0;
    d_running  BIGINT := 0;
    folded     BIGINT;
BEGIN
    IF TG_OP <> 'DELETE' THEN
        IF NEW.state IN ('queued', 'running') THEN d_reserved := NEW.budget_tokens; END IF;
        IF NEW.state = 'running' THEN d_running := NEW.budget_tokens; END IF;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF OLD.state IN ('queued', 'running') THEN d_reserved := d_reserved - OLD.budget_tokens; END IF;
        IF OLD.state = 'running' THEN d_running := d_running - OLD.budget_tokens; END IF;
    END IF;
    -- A job written under a hold of its org (asterion_budget_take) carries the reservation the
    -- hold already made.
    IF TG_OP = 'INSERT' AND d_reserved > 0
       AND strpos(coalesce(current_setting('asterion.budget_held', true), ''), ',' || org || ',') > 0 THEN
        d_reserved := 0;
    END IF;
    -- A counter's lock comes first, then the releases it folds, and the budget row before the
    -- running row: every writer takes them in that order, so two never wait on each other
    -- crosswise.
    IF d_reserved > 0 THEN
        UPDATE sa_org_budget SET reserved = reserved + d_reserved WHERE org_id = org;
        IF FOUND THEN
            WITH rel AS (DELETE FROM sa_budget_release WHERE org_id = org RETURNING reserved)
            SELECT coalesce(sum(reserved), 0) INTO folded FROM rel;
            IF folded <> 0 THEN
                UPDATE sa_org_budget SET reserved = reserved - folded WHERE org_id = org;
            END IF;
        END IF;
    ELSIF d_reserved < 0 AND EXISTS (SELECT 1 FROM sa_org_budget WHERE org_id = org) THEN
        INSERT INTO sa_budget_release (org_id, reserved) VALUES (org, -d_reserved);
    END IF;
    IF d_running > 0 THEN
        UPDATE sa_budget_running SET running = running + d_running WHERE org_id = org;
        IF FOUND THEN
            WITH rel AS (DELETE FROM sa_budget_running_release WHERE org_id = org RETURNING tokens)
            SELECT coalesce(sum(tokens), 0) INTO folded FROM rel;
            IF folded <> 0 THEN
                UPDATE sa_budget_running SET running = running - folded WHERE org_id = org;
            END IF;
        END IF;
    ELSIF d_running < 0 AND EXISTS (SELECT 1 FROM sa_budget_running WHERE org_id = org) THEN
        INSERT INTO sa_budget_running_release (org_id, tokens) VALUES (org, -d_running);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION asterion_budget_seed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    seed_running BIGINT;
BEGIN
    LOCK TABLE sa_job IN SHARE MODE;
    DELETE FROM sa_budget_release WHERE org_id = NEW.org_id;
    DELETE FROM sa_budget_running_release WHERE org_id = NEW.org_id;
    SELECT coalesce(sum(budget_tokens), 0), coalesce(sum(budget_tokens) FILTER (WHERE state = 'running'), 0)
    INTO NEW.reserved, seed_running
    FROM sa_job WHERE org_id = NEW.org_id AND state IN ('queued', 'running');
    -- A hold not yet taken is a reservation its jobs will not add again.
    NEW.reserved := NEW.reserved + (SELECT coalesce(sum(tokens), 0) FROM sa_budget_hold WHERE org_id = NEW.org_id);
    INSERT INTO sa_budget_running (org_id, running) VALUES (NEW.org_id, seed_running)
    ON CONFLICT (org_id) DO UPDATE SET running = EXCLUDED.running;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION asterion_budget_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sa_budget_running WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_running_release WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_release WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_hold WHERE org_id = OLD.org_id;
    RETURN NULL;
END;
$$;

