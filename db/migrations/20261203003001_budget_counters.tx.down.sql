DROP TRIGGER IF EXISTS trg_sa_org_budget_seed ON sa_org_budget;
DROP FUNCTION IF EXISTS asterion_budget_seed();
DROP TRIGGER IF EXISTS trg_sa_job_budget_insert ON sa_job;
DROP TRIGGER IF EXISTS trg_sa_job_budget_update ON sa_job;
DROP TRIGGER IF EXISTS trg_sa_job_budget_delete ON sa_job;
DROP FUNCTION IF EXISTS asterion_budget_reserve();
DROP TABLE IF EXISTS sa_budget_release;
ALTER TABLE sa_org_budget DROP COLUMN running, DROP COLUMN reserved;
