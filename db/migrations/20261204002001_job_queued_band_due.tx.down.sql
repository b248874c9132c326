DROP INDEX idx_job_queued_band;
CREATE INDEX idx_job_queued_band ON sa_job (asterion_band(priority), created_at, id)
    INCLUDE (priority, scheduled_at, org_id) WHERE state = 'queued';
