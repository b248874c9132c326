-- The touch trigger sets updated_at to now() (the transaction's start) on every update, by a
-- call into PL/pgSQL for each row. The hot writers (a job's state change, its registry row) set
-- updated_at to now() themselves, so the call would change nothing: a WHEN clause, evaluated in
-- the executor, skips it exactly then. Any other update still gets now().
DROP TRIGGER trg_sa_entity_updated_at ON sa_entity;
CREATE TRIGGER trg_sa_entity_updated_at BEFORE UPDATE ON sa_entity
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_job_updated_at ON sa_job;
CREATE TRIGGER trg_sa_job_updated_at BEFORE UPDATE ON sa_job
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_operation_updated_at ON sa_operation;
CREATE TRIGGER trg_sa_operation_updated_at BEFORE UPDATE ON sa_operation
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_delivery_updated_at ON sa_delivery;
CREATE TRIGGER trg_sa_delivery_updated_at BEFORE UPDATE ON sa_delivery
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_chain_updated_at ON sa_chain;
CREATE TRIGGER trg_sa_chain_updated_at BEFORE UPDATE ON sa_chain
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_chain_step_updated_at ON sa_chain_step;
CREATE TRIGGER trg_sa_chain_step_updated_at BEFORE UPDATE ON sa_chain_step
    FOR EACH ROW WHEN (NEW.updated_at IS DISTINCT FROM now()) EXECUTE FUNCTION asterion_touch_updated_at();
