-- A run cut by a graceful stop of its process ends with error_kind 'shutdown': the job is
-- queued again and the run does not count against its attempts.
ALTER TABLE sa_job DROP CONSTRAINT sa_job_error_kind_check;
ALTER TABLE sa_job ADD CONSTRAINT sa_job_error_kind_check CHECK (error_kind IN ('timeout', 'rate_limit',
    'provider_5xx', 'provider_4xx', 'parse', 'auth', 'worker_crash', 'stuck', 'unknown', 'expired', 'shutdown'));

-- A worker process that is stopping writes its row when it starts draining and marks it when
-- it has stopped, so the health page can show it draining.
CREATE TABLE sa_worker_drain (
    worker_id  VARCHAR(64) PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    grace_ms   BIGINT NOT NULL CHECK (grace_ms >= 0),
    stopped_at TIMESTAMPTZ NULL
);
