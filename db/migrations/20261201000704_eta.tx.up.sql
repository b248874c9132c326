-- Estimates of when a job starts (jobs/eta.go). River runs prompts by its four priority levels,
-- then oldest first; asterion_band (from the fair share's migration) is jobs.RiverPriority in
-- SQL, so that "the queued jobs ahead of this one" is one contiguous range of an index in River's own order, counted with a
-- bound instead of scanning a backlog. priority, scheduled_at and org_id ride along so the count
-- is an index-only scan (an expression index needs its column for that) that skips jobs not yet
-- due and tells the org's own jobs apart. Partial like the other queued index: one entry per
-- queued job.
CREATE INDEX idx_job_queued_band ON sa_job (asterion_band(priority), created_at, id)
    INCLUDE (priority, scheduled_at, org_id) WHERE state = 'queued';

-- The measured rate: the most recently finished jobs and how many finished in the last minute.
-- A job finishes once; the entry is written with its finishing update.
CREATE INDEX idx_job_finished ON sa_job (finished_at) WHERE finished_at IS NOT NULL;

-- The dashboard's "scheduled" filter: queued prompts waiting for the time they asked for, newest
-- first like the rest of the jobs list. Few jobs are scheduled, so the index is small.
CREATE INDEX idx_job_scheduled ON sa_job (created_at DESC, id DESC)
    WHERE state = 'queued' AND scheduled_for IS NOT NULL;
