-- The full text of a job's last provider failure (the provider's message, the cause with its URL
-- and addresses), for operators. sa_job.error_message holds only what a member may see. The
-- row goes with its job when the job is archived.
CREATE TABLE sa_job_error (
    job_id  UUID PRIMARY KEY REFERENCES sa_job (id) ON DELETE CASCADE,
    attempt INT NOT NULL,
    detail  TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
