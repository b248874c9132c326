-- Owners of deferred operations besides the prompt jobs (docs/architecture.md):
-- artifact.delivery (webhook delivery of a succeeded response, with its own ledger of attempts)
-- and flow.chain (ordered prompt steps, each suspended on its prompt operation).

-- The delivery ledger: the domain truth of one delivery. The registry row (sa_operation) is
-- the operator-visible mirror; state here decides what happens next.
--   accepted   waiting for its first attempt
--   in_flight  an HTTP request is being made (in_flight_token names the execution making it)
--   retryable  waiting for next_attempt_at after a 5xx, timeout or connection error
--   delivered, failed, cancelled, expired: final
CREATE TABLE sa_delivery (
    id               UUID PRIMARY KEY,
    operation_id     UUID NOT NULL UNIQUE REFERENCES sa_operation (id),
    org_id           BIGINT NOT NULL REFERENCES orgs (id),
    created_by       BIGINT NOT NULL REFERENCES users (id),
    prompt_id        UUID NOT NULL,
    job_id           UUID NOT NULL,
    response_id      UUID NOT NULL,
    url              TEXT NOT NULL,
    state            VARCHAR(16) NOT NULL DEFAULT 'accepted' CHECK (state IN ('accepted', 'in_flight',
        'retryable', 'delivered', 'failed', 'cancelled', 'expired')),
    attempts         INT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     INT NOT NULL CHECK (max_attempts >= 1),
    next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    in_flight_since  TIMESTAMPTZ NULL,
    in_flight_token  VARCHAR(64) NULL,
    last_status_code INT NULL,
    last_error       TEXT NULL,
    error_kind       VARCHAR(32) NULL,
    river_job_id     BIGINT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at      TIMESTAMPTZ NULL,
    CHECK ((state = 'in_flight') = (in_flight_since IS NOT NULL AND in_flight_token IS NOT NULL))
);
CREATE INDEX idx_delivery_open ON sa_delivery (next_attempt_at) WHERE state IN ('accepted', 'in_flight', 'retryable');
CREATE INDEX idx_delivery_job ON sa_delivery (job_id);
CREATE TRIGGER trg_sa_delivery_updated_at BEFORE UPDATE ON sa_delivery
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();

-- One row per HTTP attempt: when, what came back (status code or error) and what it meant.
CREATE TABLE sa_delivery_attempt (
    id          BIGSERIAL PRIMARY KEY,
    delivery_id UUID NOT NULL REFERENCES sa_delivery (id),
    attempt     INT NOT NULL CHECK (attempt >= 1),
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ NULL,
    status_code INT NULL,
    error       TEXT NULL,
    outcome     VARCHAR(16) NULL CHECK (outcome IN ('delivered', 'retry', 'failed', 'interrupted', 'late')),
    UNIQUE (delivery_id, attempt)
);

-- A chain of prompt steps. The steps' texts and the accumulated state live only in the
-- host-owned continuation (sa_operation_continuation); these rows are the operator view.
CREATE TABLE sa_chain (
    id                     UUID PRIMARY KEY,
    operation_id           UUID NOT NULL UNIQUE REFERENCES sa_operation (id),
    org_id                 BIGINT NOT NULL REFERENCES orgs (id),
    created_by             BIGINT NOT NULL REFERENCES users (id),
    state                  VARCHAR(16) NOT NULL CHECK (state IN ('running', 'completed', 'failed',
        'cancelled', 'expired')),
    deferred_response_mode VARCHAR(32) NOT NULL CHECK (deferred_response_mode IN ('suspend', 'reject-as-failure')),
    priority               SMALLINT NOT NULL CHECK (priority BETWEEN 0 AND 100),
    step_count             SMALLINT NOT NULL CHECK (step_count BETWEEN 1 AND 20),
    current_step           SMALLINT NOT NULL DEFAULT 0,
    idempotency_key        VARCHAR(255) NULL,
    request_hash           CHAR(64) NOT NULL,
    result                 JSONB NULL,
    diagnostic             JSONB NULL,
    created_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at            TIMESTAMPTZ NULL,
    UNIQUE (created_by, idempotency_key)
);
CREATE INDEX idx_chain_org_created ON sa_chain (org_id, created_at DESC);
CREATE TRIGGER trg_sa_chain_updated_at BEFORE UPDATE ON sa_chain
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();

-- One row per step: its state and the prompt, job and operation it ran as (never its text).
CREATE TABLE sa_chain_step (
    chain_id         UUID NOT NULL REFERENCES sa_chain (id),
    step             SMALLINT NOT NULL CHECK (step BETWEEN 1 AND 20),
    include_previous BOOLEAN NOT NULL DEFAULT false,
    state            VARCHAR(16) NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'suspended', 'completed',
        'failed', 'timed-out', 'cancelled', 'expired', 'unknown', 'skipped')),
    prompt_id        UUID NULL,
    job_id           UUID NULL,
    operation_id     UUID NULL REFERENCES sa_operation (id),
    response_id      UUID NULL,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, step)
);
CREATE INDEX idx_chain_step_operation ON sa_chain_step (operation_id);
CREATE TRIGGER trg_sa_chain_step_updated_at BEFORE UPDATE ON sa_chain_step
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
