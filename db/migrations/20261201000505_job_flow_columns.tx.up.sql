-- How a cancel landed (before the provider call, or cutting it), what a queued job waits for
-- (provider capacity, its org share, a paused org), and the time a scheduled prompt asked to
-- run at. The archive keeps the same columns; archive-old-jobs names them explicitly.
ALTER TABLE sa_job
    ADD COLUMN cancel_outcome VARCHAR(16) NULL CHECK (cancel_outcome IN ('before_start', 'aborted')),
    ADD COLUMN waiting_for VARCHAR(32) NULL,
    ADD COLUMN scheduled_for TIMESTAMPTZ NULL;
ALTER TABLE sa_job_archive
    ADD COLUMN cancel_outcome VARCHAR(16) NULL,
    ADD COLUMN waiting_for VARCHAR(32) NULL,
    ADD COLUMN scheduled_for TIMESTAMPTZ NULL;
