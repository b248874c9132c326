-- Files of the OpenAI-compatible front door: a batch's input, output and error files. A file
-- is kept as its lines (bytes exactly as uploaded, without the newline that ended each), so an
-- upload is written and a batch read in bounded chunks, never whole. ends_with_newline says
-- whether the last line had one, so the content is given back byte for byte.
CREATE TABLE sa_file (
    id                TEXT PRIMARY KEY,
    org_id            BIGINT NOT NULL REFERENCES orgs (id),
    created_by        BIGINT NOT NULL REFERENCES users (id),
    purpose           TEXT NOT NULL,
    filename          TEXT NOT NULL,
    bytes             BIGINT NOT NULL DEFAULT 0,
    line_count        INTEGER NOT NULL DEFAULT 0,
    ends_with_newline BOOLEAN NOT NULL DEFAULT true,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX sa_file_org ON sa_file (org_id, created_at DESC);

CREATE TABLE sa_file_line (
    file_id TEXT NOT NULL REFERENCES sa_file (id) ON DELETE CASCADE,
    line_no INTEGER NOT NULL,
    body    BYTEA NOT NULL,
    PRIMARY KEY (file_id, line_no)
);

-- A batch: its status as OpenAI names it, the registry row that makes it a deferred operation,
-- and its progress. expanded_lines is how many lines of the input file have become jobs or
-- error lines, so an expansion cut short by a crash resumes where it stopped.
CREATE TABLE sa_batch (
    id                TEXT PRIMARY KEY,
    org_id            BIGINT NOT NULL REFERENCES orgs (id),
    created_by        BIGINT NOT NULL REFERENCES users (id),
    operation_id      UUID NOT NULL,
    endpoint          TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    input_file_id     TEXT NOT NULL,
    output_file_id    TEXT NULL,
    error_file_id     TEXT NULL,
    status            TEXT NOT NULL,
    -- end_as is the terminal status a cancelling batch ends in: cancelled, or expired when its
    -- window ran out.
    end_as            TEXT NULL,
    metadata          JSONB NULL,
    errors            JSONB NULL,
    total_lines       INTEGER NOT NULL DEFAULT 0,
    expanded_lines    INTEGER NOT NULL DEFAULT 0,
    completed_count   INTEGER NOT NULL DEFAULT 0,
    failed_count      INTEGER NOT NULL DEFAULT 0,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at        TIMESTAMPTZ NOT NULL,
    in_progress_at    TIMESTAMPTZ NULL,
    finalizing_at     TIMESTAMPTZ NULL,
    completed_at      TIMESTAMPTZ NULL,
    failed_at         TIMESTAMPTZ NULL,
    expired_at        TIMESTAMPTZ NULL,
    cancelling_at     TIMESTAMPTZ NULL,
    cancelled_at      TIMESTAMPTZ NULL
);
CREATE INDEX sa_batch_org ON sa_batch (org_id, created_at DESC, id DESC);
CREATE INDEX sa_batch_active ON sa_batch (created_at)
    WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');
CREATE UNIQUE INDEX sa_batch_operation ON sa_batch (operation_id);

-- One line of a batch: the job it became, or why it did not (error_code, error_message).
CREATE TABLE sa_batch_request (
    batch_id      TEXT NOT NULL REFERENCES sa_batch (id) ON DELETE CASCADE,
    line_no       INTEGER NOT NULL,
    custom_id     TEXT NULL,
    job_id        UUID NULL,
    error_code    TEXT NULL,
    error_message TEXT NULL,
    PRIMARY KEY (batch_id, line_no)
);
CREATE INDEX sa_batch_request_job ON sa_batch_request (job_id) WHERE job_id IS NOT NULL;

-- The door a job of the OpenAI-compatible front door came through (front_door, batch), for
-- the dashboard and the health page; a job of any other door has no row.
CREATE TABLE sa_job_door (
    job_id UUID PRIMARY KEY,
    door   TEXT NOT NULL
);
