DROP INDEX IF EXISTS idx_attempt_finished;
