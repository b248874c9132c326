-- The transaction writing the jobs of a hold takes it before it writes them: it deletes the
-- hold's rows, so the reservation the hold made becomes its jobs' (their trigger then adds
-- nothing for these orgs: the transaction-local setting asterion.budget_held names them). A
-- hold that is gone (swept, or given back) fails the transaction, whose submits are then
-- admitted again under the budget's lock.
CREATE OR REPLACE FUNCTION asterion_budget_take(hold UUID) RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    orgs TEXT;
BEGIN
    WITH h AS (DELETE FROM sa_budget_hold WHERE id = hold RETURNING org_id)
    SELECT string_agg(org_id::text, ',') INTO orgs FROM h;
    IF orgs IS NULL THEN
        RAISE EXCEPTION 'budget hold % is gone', hold USING ERRCODE = 'AS001';
    END IF;
    PERFORM set_config('asterion.budget_held', ',' || orgs || ',', true);
END;
$$;
