-- Idempotency keys expire after 24 hours; the prune job deletes them by age.
CREATE INDEX IF NOT EXISTS idx_idempotency_created ON sa_idempotency (created_at);
