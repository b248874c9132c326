-- A budget row starts from the reservations its org's jobs and untaken holds make, whoever
-- writes it, and its running row from those of its running jobs and untaken start holds. The
-- share lock on the jobs waits for every transaction writing jobs to end and holds the next ones
-- back until the transaction writing the row commits: a job written before is in the seed, a
-- job written after finds the rows and its trigger counts it, and none is in both or neither.
--
-- The trigger runs before every insert, an upsert that changes an existing budget included; it
-- drops the org's pending releases, so such an upsert must take the seeded count
-- (reserved = EXCLUDED.reserved) for the counters and the releases to stay one account.
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
    seed_running := seed_running + (SELECT coalesce(sum(tokens), 0) FROM sa_budget_start_hold WHERE org_id = NEW.org_id);
    INSERT INTO sa_budget_running (org_id, running) VALUES (NEW.org_id, seed_running)
    ON CONFLICT (org_id) DO UPDATE SET running = EXCLUDED.running;
    RETURN NEW;
END;
$$;
