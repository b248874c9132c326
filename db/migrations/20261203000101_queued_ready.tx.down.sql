DROP INDEX idx_job_queued_waiting;
DROP INDEX idx_job_queued_ready;
