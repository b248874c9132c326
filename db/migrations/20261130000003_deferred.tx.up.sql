-- The deferred-operation registry (docs/architecture.md): the durable host read model.
CREATE TABLE sa_operation (
    id                        UUID PRIMARY KEY,
    kind                      VARCHAR(64) NOT NULL,
    owner                     VARCHAR(128) NOT NULL,
    status                    VARCHAR(16) NOT NULL CHECK (status IN ('pending', 'running', 'completed',
        'failed', 'timed-out', 'cancelled', 'expired', 'unknown')),
    org_id                    BIGINT NOT NULL REFERENCES orgs (id),
    created_by                BIGINT NOT NULL REFERENCES users (id),
    subject                   JSONB NOT NULL DEFAULT '{}'::jsonb,
    correlation_id            UUID NOT NULL,
    accepted_at               TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at                TIMESTAMPTZ NOT NULL,
    retry_after_seconds       INT NOT NULL CHECK (retry_after_seconds BETWEEN 1 AND 60),
    cancel_unavailable_reason TEXT NULL,
    continuation_digest       TEXT NULL,
    diagnostics_digest        TEXT NULL,
    result                    JSONB NULL,
    last_error_kind           VARCHAR(32) NULL,
    last_error_message        TEXT NULL,
    successor_id              UUID NULL,
    next_poll_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    poll_count                INT NOT NULL DEFAULT 0,
    terminal_at               TIMESTAMPTZ NULL,
    updated_at                TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_operation_org_accepted ON sa_operation (org_id, accepted_at DESC, id DESC);
CREATE INDEX idx_operation_accepted ON sa_operation (accepted_at DESC, id DESC);
CREATE INDEX idx_operation_status_accepted ON sa_operation (status, accepted_at DESC, id DESC);
CREATE INDEX idx_operation_due ON sa_operation (next_poll_at) WHERE terminal_at IS NULL;
CREATE INDEX idx_operation_correlation ON sa_operation (correlation_id);
CREATE TRIGGER trg_sa_operation_updated_at BEFORE UPDATE ON sa_operation
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();

-- Append-only, digest-chained status history: no raw documents, only their SHA-256 digests.
CREATE TABLE sa_operation_history (
    id           BIGSERIAL PRIMARY KEY,
    operation_id UUID NOT NULL REFERENCES sa_operation (id),
    seq          BIGINT NOT NULL,
    status       VARCHAR(16) NOT NULL,
    at           TIMESTAMPTZ NOT NULL,
    doc_digest   CHAR(64) NOT NULL,
    prev_digest  CHAR(64) NOT NULL,
    entry_digest CHAR(64) NOT NULL,
    UNIQUE (operation_id, seq)
);

-- Host-owned continuation state of a suspended owner. No API, page or log reads this table.
CREATE TABLE sa_operation_continuation (
    operation_id UUID PRIMARY KEY REFERENCES sa_operation (id),
    owner        VARCHAR(128) NOT NULL,
    data         BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Counts per org and status, kept by trigger so the dashboard never counts millions of rows. Each
-- change appends delta rows (+1 for the new status, -1 for the old); nothing is ever updated in
-- place, so concurrent writers never wait on, or deadlock over, a counter row. A reader sums;
-- asterion_compact_counts() folds the deltas periodically.
CREATE TABLE sa_operation_count (
    id     BIGSERIAL PRIMARY KEY,
    org_id BIGINT NOT NULL,
    status VARCHAR(16) NOT NULL,
    n      BIGINT NOT NULL
);

CREATE FUNCTION asterion_count_operation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status) THEN
        INSERT INTO sa_operation_count (org_id, status, n) VALUES (NEW.org_id, NEW.status, 1);
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status) THEN
        INSERT INTO sa_operation_count (org_id, status, n) VALUES (OLD.org_id, OLD.status, -1);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER trg_sa_operation_count AFTER INSERT OR UPDATE OF status OR DELETE ON sa_operation
    FOR EACH ROW EXECUTE FUNCTION asterion_count_operation();

-- Folds the counter deltas of sa_job_count and sa_operation_count into one row per key. Safe
-- beside concurrent writers: it deletes only the rows its snapshot sees and re-inserts their sum.
CREATE FUNCTION asterion_compact_counts() RETURNS void LANGUAGE sql AS $$
WITH d AS (DELETE FROM sa_job_count RETURNING org_id, state, n)
INSERT INTO sa_job_count (org_id, state, n)
SELECT org_id, state, sum(n) FROM d GROUP BY org_id, state HAVING sum(n) <> 0;
WITH d AS (DELETE FROM sa_operation_count RETURNING org_id, status, n)
INSERT INTO sa_operation_count (org_id, status, n)
SELECT org_id, status, sum(n) FROM d GROUP BY org_id, status HAVING sum(n) <> 0;
$$;
