-- Usage: one row per attempt of a job that reached the provider (tokens in and out, model,
-- cost from the price table when it ran), and running totals per org and budget period so a
-- submit checks its org's budget with one indexed read.
CREATE TABLE sa_attempt (
    job_id        UUID NOT NULL,
    attempt       SMALLINT NOT NULL CHECK (attempt >= 1),
    org_id        BIGINT NOT NULL,
    model         TEXT NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    error_kind    VARCHAR(32) NULL,
    input_tokens  INTEGER NOT NULL CHECK (input_tokens >= 0),
    output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
    cost_usd      DOUBLE PRECISION NOT NULL CHECK (cost_usd >= 0),
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX idx_attempt_org_finished ON sa_attempt (org_id, finished_at);

-- Budgets: tokens per UTC day or month for an org; no row means no budget.
CREATE TABLE sa_org_budget (
    org_id BIGINT PRIMARY KEY REFERENCES orgs (id),
    tokens BIGINT NOT NULL CHECK (tokens >= 1),
    period VARCHAR(8) NOT NULL CHECK (period IN ('day', 'month'))
);

-- Tokens recorded per org in each UTC day and month, kept by the writer of sa_attempt in the
-- same statement. Each total is spread over a few shard rows, picked at random by the writer,
-- so finishing jobs of one busy org do not queue behind one row lock; a reader sums them.
CREATE TABLE sa_usage_period (
    org_id       BIGINT NOT NULL,
    period       VARCHAR(8) NOT NULL CHECK (period IN ('day', 'month')),
    period_start TIMESTAMPTZ NOT NULL,
    shard        SMALLINT NOT NULL,
    tokens       BIGINT NOT NULL DEFAULT 0,
    cost_usd     DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (org_id, period, period_start, shard)
);
