-- Two indexes of sa_job that no read uses, each written by every job: the queued jobs by
-- (state, priority, created_at), which every queue read finds through the band indexes
-- (idx_job_queued_band, idx_job_queued_org, idx_job_queued_ready) instead, and the running jobs
-- by worker_claim, which every claim check reads by the job's id with the claim as a condition.
DROP INDEX idx_state_priority_created;
DROP INDEX idx_worker_claim;
