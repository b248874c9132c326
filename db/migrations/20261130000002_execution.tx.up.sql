-- Entities: prompts and responses, the authored knowledge; jobs execute prompts into responses.
CREATE TABLE sa_entity (
    id             UUID PRIMARY KEY,
    kind           VARCHAR(16) NOT NULL CHECK (kind IN ('prompt', 'response')),
    body           TEXT NOT NULL,
    correlation_id UUID NOT NULL,
    parent_id      UUID NULL REFERENCES sa_entity (id),
    causation_id   UUID NULL,
    source_refs    JSONB NOT NULL DEFAULT '[]'::jsonb,
    truth_class    VARCHAR(32) NOT NULL,
    state_class    VARCHAR(32) NOT NULL,
    org_id         BIGINT NOT NULL REFERENCES orgs (id),
    created_by     BIGINT NOT NULL REFERENCES users (id),
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_entity_org_user_created ON sa_entity (org_id, created_by, created_at);
CREATE INDEX idx_entity_org_updated ON sa_entity (org_id, updated_at);
CREATE INDEX idx_entity_parent ON sa_entity (parent_id);
CREATE INDEX idx_entity_correlation ON sa_entity (correlation_id);
CREATE TRIGGER trg_sa_entity_updated_at BEFORE UPDATE ON sa_entity
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();

-- Jobs: one execution attempt chain of a prompt, the columns of section 4 in PostgreSQL types.
-- river_job_id names the River job that currently carries this row (the vehicle); scheduled_at
-- keeps the backoff of a re-queued job, so created_at stays the order in which work was asked for.
CREATE TABLE sa_job (
    id                   UUID NOT NULL,
    prompt_id            UUID NOT NULL REFERENCES sa_entity (id),
    state                VARCHAR(16) NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'superseded')),
    priority             SMALLINT NOT NULL DEFAULT 50 CHECK (priority BETWEEN 0 AND 100),
    attempt              SMALLINT NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    max_attempts         SMALLINT NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    execution_options    JSONB NOT NULL,
    worker_claim         VARCHAR(64) NULL,
    claimed_at           TIMESTAMPTZ NULL,
    started_at           TIMESTAMPTZ NULL,
    running_heartbeat_at TIMESTAMPTZ NULL,
    finished_at          TIMESTAMPTZ NULL,
    response_id          UUID NULL REFERENCES sa_entity (id),
    error_kind           VARCHAR(32) NULL CHECK (error_kind IN ('timeout', 'rate_limit', 'provider_5xx',
        'provider_4xx', 'parse', 'auth', 'worker_crash', 'stuck', 'unknown', 'expired')),
    error_message        TEXT NULL,
    supersedes           UUID NULL REFERENCES sa_job (id),
    org_id               BIGINT NOT NULL REFERENCES orgs (id),
    created_by           BIGINT NOT NULL REFERENCES users (id),
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    river_job_id         BIGINT NULL,
    scheduled_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    operation_id         UUID NULL,
    PRIMARY KEY (id)
);
CREATE INDEX idx_state_priority_created ON sa_job (state, priority, created_at);
CREATE INDEX idx_prompt ON sa_job (prompt_id);
CREATE INDEX idx_worker_claim ON sa_job (worker_claim);
CREATE INDEX idx_org_user_state ON sa_job (org_id, created_by, state);
CREATE INDEX idx_heartbeat ON sa_job (state, running_heartbeat_at);
CREATE INDEX idx_job_org_updated ON sa_job (org_id, updated_at);
CREATE INDEX idx_job_created_id ON sa_job (created_at DESC, id DESC);
CREATE INDEX idx_job_supersedes ON sa_job (supersedes);
CREATE TRIGGER trg_sa_job_updated_at BEFORE UPDATE ON sa_job
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();

-- Jobs moved out of sa_job by archive-old-jobs; same columns, no foreign keys.
CREATE TABLE sa_job_archive (LIKE sa_job INCLUDING DEFAULTS);
ALTER TABLE sa_job_archive ADD PRIMARY KEY (id);
ALTER TABLE sa_job_archive ADD COLUMN archived_at TIMESTAMPTZ NOT NULL DEFAULT now();

CREATE TABLE sa_edge (
    id         BIGSERIAL PRIMARY KEY,
    kind       VARCHAR(32) NOT NULL CHECK (kind IN ('flows-to')),
    from_id    UUID NOT NULL REFERENCES sa_entity (id),
    to_id      UUID NOT NULL REFERENCES sa_entity (id),
    org_id     BIGINT NOT NULL REFERENCES orgs (id),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (kind, from_id, to_id)
);
CREATE INDEX idx_edge_to ON sa_edge (to_id);

CREATE TABLE sa_ledger (
    id                BIGSERIAL PRIMARY KEY,
    job_id            UUID NOT NULL,
    prompt_id         UUID NOT NULL,
    response_id       UUID NOT NULL,
    org_id            BIGINT NOT NULL REFERENCES orgs (id),
    provider          TEXT NOT NULL,
    model             TEXT NOT NULL DEFAULT '',
    request_id        TEXT NOT NULL DEFAULT '',
    prompt_tokens     INT NOT NULL DEFAULT 0,
    completion_tokens INT NOT NULL DEFAULT 0,
    duration_ms       BIGINT NOT NULL DEFAULT 0,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_ledger_job ON sa_ledger (job_id);
CREATE INDEX idx_ledger_org_created ON sa_ledger (org_id, created_at);

CREATE TABLE sa_audit (
    id           BIGSERIAL PRIMARY KEY,
    org_id       BIGINT NOT NULL REFERENCES orgs (id),
    actor_id     BIGINT NULL REFERENCES users (id),
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    subject_type TEXT NOT NULL,
    subject_id   TEXT NOT NULL,
    detail       JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_audit_subject ON sa_audit (subject_type, subject_id);
CREATE INDEX idx_audit_org_created ON sa_audit (org_id, created_at);

-- Idempotency keys of POST /prompt: the same key and body from the same user give the same answer.
CREATE TABLE sa_idempotency (
    user_id      BIGINT NOT NULL REFERENCES users (id),
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    prompt_id    UUID NOT NULL,
    job_id       UUID NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- The change feed. A writer inserts an event (seq NULL) in the transaction that makes the change;
-- the sequencer later numbers committed events in commit-visible order, so a reader that has seen
-- seq N never sees a smaller seq appear afterwards.
CREATE TABLE sa_event (
    id           BIGSERIAL PRIMARY KEY,
    seq          BIGINT NULL UNIQUE,
    topic        VARCHAR(32) NOT NULL,
    org_id       BIGINT NOT NULL,
    user_id      BIGINT NOT NULL,
    prompt_id    UUID NULL,
    job_id       UUID NULL,
    operation_id UUID NULL,
    payload      JSONB NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_event_unsequenced ON sa_event (id) WHERE seq IS NULL;
CREATE INDEX idx_event_created ON sa_event (created_at);

CREATE TABLE sa_event_cursor (
    id       SMALLINT PRIMARY KEY CHECK (id = 1),
    last_seq BIGINT NOT NULL
);
INSERT INTO sa_event_cursor (id, last_seq) VALUES (1, 0);

-- Counts per org and state, kept by trigger so the dashboard never counts millions of rows. Each
-- change appends delta rows (+1 for the new state, -1 for the old); nothing is ever updated in
-- place, so concurrent writers never wait on, or deadlock over, a counter row. A reader sums;
-- asterion_compact_counts() folds the deltas periodically.
CREATE TABLE sa_job_count (
    id     BIGSERIAL PRIMARY KEY,
    org_id BIGINT NOT NULL,
    state VARCHAR(16) NOT NULL,
    n      BIGINT NOT NULL
);

CREATE FUNCTION asterion_count_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.state IS DISTINCT FROM OLD.state) THEN
        INSERT INTO sa_job_count (org_id, state, n) VALUES (NEW.org_id, NEW.state, 1);
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.state IS DISTINCT FROM OLD.state) THEN
        INSERT INTO sa_job_count (org_id, state, n) VALUES (OLD.org_id, OLD.state, -1);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER trg_sa_job_count AFTER INSERT OR UPDATE OF state OR DELETE ON sa_job
    FOR EACH ROW EXECUTE FUNCTION asterion_count_job();
