DROP INDEX IF EXISTS idx_idempotency_created;
