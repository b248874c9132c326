-- Live output: the text a running job's provider call has produced, in chunks numbered per
-- attempt. gid orders chunks across jobs so that another process can fetch exactly the rows a
-- flush announced; prompt_id, org_id and created_by are copied from the job so that a stream
-- can be scoped and labelled without a join. pieces counts the provider's pieces in the chunk (about one token
-- each), so a job's progress is read from its output rather than written twice.
CREATE TABLE sa_job_output (
    job_id     UUID NOT NULL REFERENCES sa_job (id),
    attempt    SMALLINT NOT NULL CHECK (attempt >= 1),
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    text       TEXT NOT NULL,
    pieces     INTEGER NOT NULL CHECK (pieces >= 1),
    prompt_id  UUID NOT NULL,
    org_id     BIGINT NOT NULL,
    created_by BIGINT NOT NULL,
    at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    gid        BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (job_id, attempt, seq)
);
CREATE INDEX idx_job_output_gid ON sa_job_output (gid);

-- Output of archived jobs, moved with them by archive-old-jobs.
CREATE TABLE sa_job_output_archive (
    job_id     UUID NOT NULL,
    attempt    SMALLINT NOT NULL,
    seq        INTEGER NOT NULL,
    text       TEXT NOT NULL,
    pieces     INTEGER NOT NULL,
    prompt_id  UUID NOT NULL,
    org_id     BIGINT NOT NULL,
    created_by BIGINT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);
