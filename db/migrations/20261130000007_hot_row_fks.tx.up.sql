-- Every submit and every finalise wrote rows whose org_id and created_by referenced the same org
-- and user rows. Each such foreign-key check takes a KEY SHARE lock on the referenced row, and
-- many transactions sharing one row's lock turn it into a multixact: at 50 concurrent submits
-- of one user this cost a fifth of the submit throughput. The schema needs no reference on these
-- columns: orgs and users are never deleted, and the ids written come from
-- the authenticated principal. References between work rows (prompt, response, operation) stay.
ALTER TABLE sa_job DROP CONSTRAINT IF EXISTS sa_job_org_id_fkey,
                   DROP CONSTRAINT IF EXISTS sa_job_created_by_fkey;
ALTER TABLE sa_entity DROP CONSTRAINT IF EXISTS sa_entity_org_id_fkey,
                      DROP CONSTRAINT IF EXISTS sa_entity_created_by_fkey;
ALTER TABLE sa_operation DROP CONSTRAINT IF EXISTS sa_operation_org_id_fkey,
                         DROP CONSTRAINT IF EXISTS sa_operation_created_by_fkey;
ALTER TABLE sa_edge DROP CONSTRAINT IF EXISTS sa_edge_org_id_fkey;
ALTER TABLE sa_ledger DROP CONSTRAINT IF EXISTS sa_ledger_org_id_fkey;
ALTER TABLE sa_audit DROP CONSTRAINT IF EXISTS sa_audit_org_id_fkey;
