-- The reservations of an org's running jobs move from its budget row to a row of their own, so
-- that a start (which checks and adds to them under that row's lock) and an admission (which
-- checks and adds to the reservations of the org's unfinished jobs under the budget row's lock)
-- never wait on each other. Their releases move to a table of their own for the same reason.
-- Admissions on the submit path hold their reservations ahead of their jobs' transactions.
CREATE TABLE sa_budget_running (
    org_id  BIGINT PRIMARY KEY,
    running BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE sa_budget_running_release (
    org_id BIGINT NOT NULL,
    tokens BIGINT NOT NULL
);
CREATE INDEX idx_budget_running_release_org ON sa_budget_running_release (org_id);

-- Admissions held ahead of the transactions that write their jobs (see asterion_budget_hold).
CREATE TABLE sa_budget_hold (
    id         UUID NOT NULL,
    org_id     BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (id, org_id)
);
CREATE INDEX idx_budget_hold_org ON sa_budget_hold (org_id, created_at);

LOCK TABLE sa_job IN SHARE MODE;
INSERT INTO sa_budget_running (org_id, running) SELECT org_id, running FROM sa_org_budget;
INSERT INTO sa_budget_running_release (org_id, tokens) SELECT org_id, running FROM sa_budget_release WHERE running <> 0;
DELETE FROM sa_budget_release WHERE reserved = 0;
ALTER TABLE sa_budget_release DROP COLUMN running;
ALTER TABLE sa_org_budget DROP COLUMN running;

CREATE FUNCTION asterion_budget_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sa_budget_running WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_running_release WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_release WHERE org_id = OLD.org_id;
    DELETE FROM sa_budget_hold WHERE org_id = OLD.org_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER trg_sa_org_budget_forget AFTER DELETE ON sa_org_budget
    FOR EACH ROW EXECUTE FUNCTION asterion_budget_forget();
