-- Fair share between orgs: each org weight (a free slot goes to the org with the fewest running
-- jobs relative to its weight) and whether an operator paused its work. No row: weight 1, not
-- paused.
CREATE TABLE sa_org_share (
    org_id     BIGINT PRIMARY KEY REFERENCES orgs (id),
    weight     INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    paused     BOOLEAN NOT NULL DEFAULT false,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
