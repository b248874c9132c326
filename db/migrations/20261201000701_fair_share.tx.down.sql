DROP INDEX idx_job_running_org;
DROP INDEX idx_job_queued_org;
DROP INDEX idx_job_vehicle;
DROP FUNCTION asterion_band(SMALLINT);
