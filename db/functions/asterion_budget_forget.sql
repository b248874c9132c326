-- A budget cleared takes its org's running counter, pending releases and holds (its starts'
-- too) with it: the org's jobs then update nothing, and a budget set again seeds both counters
-- afresh.
CREATE OR REPLACE FUNCTION asterion_budget_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sa_budget_running WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_running_release WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_release WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_hold WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_start_hold WHERE org_id = OLD.org_id;
    RETURN NULL;
END;
$$;
