-- idx_job_queued_band serves the estimates' walks of the queue in River's order across every
-- org (band, then oldest first), and only those: fair share reads an org's queued jobs through
-- idx_job_queued_org, org first. Both indexes hold every queued job and give the same order
-- within one org, so when the planner's statistics last saw an empty queue (a vacuum that ran
-- while it had drained) it priced them alike and sometimes walked the band index through every
-- org's backlog for the one org's head, once per claim. The band index now also says that its
-- jobs have a time to become due: always true of a queued job, and implied by the estimates'
-- own condition (scheduled_at <= now()), but by none of fair share's reads, so the planner can
-- no longer choose it for them.
DROP INDEX idx_job_queued_band;
CREATE INDEX idx_job_queued_band ON sa_job (asterion_band(priority), created_at, id)
    INCLUDE (priority, scheduled_at, org_id) WHERE state = 'queued' AND scheduled_at IS NOT NULL;
