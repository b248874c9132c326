-- The operator's jobs list is newest first, keyset-paged on (created_at, id). Scoped to one org
-- or one state it otherwise walks the whole table in time order and filters: at a million jobs
-- an org whose jobs are all old took hundreds of milliseconds per page.
CREATE INDEX idx_job_org_created_id ON sa_job (org_id, created_at DESC, id DESC);
CREATE INDEX idx_job_state_created_id ON sa_job (state, created_at DESC, id DESC);
