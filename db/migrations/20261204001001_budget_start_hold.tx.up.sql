-- Starts hold their running reservations ahead of the transactions that start their jobs (see
-- asterion_budget_start_hold): one row per job whose start is held, taken by the change that
-- moves the job to running.
CREATE TABLE sa_budget_start_hold (
    job_id     UUID PRIMARY KEY,
    id         UUID NOT NULL,
    org_id     BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_budget_start_hold_org ON sa_budget_start_hold (org_id, created_at);
