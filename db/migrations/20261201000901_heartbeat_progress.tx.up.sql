-- A running job's heartbeat carries its progress: how many output chunks and about how many
-- tokens its current attempt has written, as the job document and the job's page show them.
ALTER TABLE sa_job
    ADD COLUMN progress_chunks integer NOT NULL DEFAULT 0,
    ADD COLUMN progress_tokens integer NOT NULL DEFAULT 0;
-- A heartbeat must be a heap-only update: the index on running_heartbeat_at, and the touch
-- trigger moving the indexed updated_at, made every beat write a new entry into each of the
-- table's indexes, so that one statement beating a process's thousands of running jobs took
-- long enough to stall the submits beside it. Running jobs are few: the reclaim, the liveness
-- and the queue sample find them through a partial index whose key a heartbeat never changes,
-- and the half of each page fillfactor keeps free holds the new row versions on their pages.
-- A heartbeat is proof of life, not a change of the job: it leaves updated_at alone (every
-- other writer that moves the heartbeat, a claim, sets updated_at itself).
DROP INDEX idx_heartbeat;
CREATE INDEX idx_job_running ON sa_job (started_at) WHERE state = 'running';
ALTER TABLE sa_job SET (fillfactor = 50);
DROP TRIGGER trg_sa_job_updated_at ON sa_job;
CREATE TRIGGER trg_sa_job_updated_at BEFORE UPDATE ON sa_job
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()
        AND NEW.running_heartbeat_at IS NOT DISTINCT FROM OLD.running_heartbeat_at)
    EXECUTE FUNCTION asterion_touch_updated_at();
