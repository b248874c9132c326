-- A hold whose transaction did not commit gives its tokens back as release rows, taking no lock.
-- Its transaction's outcome need not be known: one that committed took the hold's rows with it,
-- and one still committing holds them until it ends, so a hold is given back at most once and
-- only when its jobs were not written.
CREATE OR REPLACE FUNCTION asterion_budget_giveback(hold UUID) RETURNS void LANGUAGE sql AS $$
    WITH h AS (DELETE FROM sa_budget_hold WHERE id = hold RETURNING org_id, tokens)
    INSERT INTO sa_budget_release (org_id, reserved) SELECT org_id, tokens FROM h;
$$;
