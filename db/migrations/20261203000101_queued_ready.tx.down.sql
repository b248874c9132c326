DROP INDEX idx_job_queued_ready;
