-- The change feed's creation time was indexed for its pruning alone, and every event paid for
-- the entry twice (written, then numbered by the sequencer). Pruning now walks the numbers from
-- the oldest kept event, which visits only what it deletes (jobs/feed/prune.go).
DROP INDEX idx_event_created;
