DROP INDEX idx_job_scheduled;
DROP INDEX idx_job_finished;
DROP INDEX idx_job_queued_band;
