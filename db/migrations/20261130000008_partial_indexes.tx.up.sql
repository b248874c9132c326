-- A job row is written three times in its life (queued, running, settled), and a state change is
-- never a HOT update, so each write adds an entry to every index of sa_job. Four of its indexes
-- serve one kind of row only: the heartbeat and claim indexes find live executions, the
-- state/priority index finds queued work, and the supersedes index follows retry chains, which
-- most jobs are not part of. Kept partial, with the columns they were designed with, they
-- take one entry per job (or none) instead of three. Every query that uses them names the
-- state (or compares supersedes, which implies it is not null).
DROP INDEX idx_heartbeat;
CREATE INDEX idx_heartbeat ON sa_job (state, running_heartbeat_at) WHERE state = 'running';
DROP INDEX idx_worker_claim;
CREATE INDEX idx_worker_claim ON sa_job (worker_claim) WHERE state = 'running';
DROP INDEX idx_state_priority_created;
CREATE INDEX idx_state_priority_created ON sa_job (state, priority, created_at) WHERE state = 'queued';
DROP INDEX idx_job_supersedes;
CREATE INDEX idx_job_supersedes ON sa_job (supersedes) WHERE supersedes IS NOT NULL;

-- Entities are written once and never updated: nothing reads them by updated_at. Most prompts
-- start a thread and have no parent.
DROP INDEX idx_entity_org_updated;
DROP INDEX idx_entity_parent;
CREATE INDEX idx_entity_parent ON sa_entity (parent_id) WHERE parent_id IS NOT NULL;

-- The counter tables are append-only delta logs that readers sum and compaction folds; no row is
-- ever looked up alone, so the serial key only cost a sequence call and an index entry per delta.
ALTER TABLE sa_job_count DROP COLUMN id;
ALTER TABLE sa_operation_count DROP COLUMN id;
