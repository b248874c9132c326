DROP INDEX idx_job_vehicle;
CREATE INDEX idx_job_vehicle ON sa_job (river_job_id) WHERE state IN ('queued', 'running');
