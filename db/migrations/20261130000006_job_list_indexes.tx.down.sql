DROP INDEX IF EXISTS idx_job_state_created_id;
DROP INDEX IF EXISTS idx_job_org_created_id;
