CREATE INDEX idx_state_priority_created ON sa_job (state, priority, created_at) WHERE state = 'queued';
CREATE INDEX idx_worker_claim ON sa_job (worker_claim) WHERE state = 'running';
