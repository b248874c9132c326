DROP TRIGGER trg_sa_job_updated_at ON sa_job;
CREATE TRIGGER trg_sa_job_updated_at BEFORE UPDATE ON sa_job
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
ALTER TABLE sa_job RESET (fillfactor);
DROP INDEX idx_job_running;
CREATE INDEX idx_heartbeat ON sa_job (state, running_heartbeat_at) WHERE state = 'running';
ALTER TABLE sa_job DROP COLUMN progress_tokens, DROP COLUMN progress_chunks;
