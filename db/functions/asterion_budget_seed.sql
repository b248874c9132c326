-- A new budget row starts from the reservations its org's jobs already hold, whoever writes it.
-- The share lock on the jobs waits for every transaction writing jobs to end and holds the next
-- ones back until the transaction inserting the row commits: a job written before is in the
-- seed, a job written after finds the row and its trigger counts it, and none is in both or
-- neither. Changing an existing budget keeps its counters (the update takes no seed).
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
