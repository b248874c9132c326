-- The mission page's versions read (jobs/mission_versions.go) runs on every reload: the newest
-- prompts of one user, each with its newest job's id, state and updated_at. Both halves become
-- index-only scans: the prompts through a partial index of prompts alone (responses share the
-- table and the org/user index), the newest job through an index in the order the read wants,
-- carrying what it returns. The job index replaces the plain prompt_id one, which it serves too.
CREATE INDEX idx_entity_prompts ON sa_entity (org_id, created_by, created_at, id) WHERE kind = 'prompt';
CREATE INDEX idx_job_prompt_newest ON sa_job (prompt_id, created_at DESC, id DESC)
    INCLUDE (state, updated_at, org_id, created_by);
DROP INDEX idx_prompt;
