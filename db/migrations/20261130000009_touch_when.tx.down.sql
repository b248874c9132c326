DROP TRIGGER trg_sa_entity_updated_at ON sa_entity;
CREATE TRIGGER trg_sa_entity_updated_at BEFORE UPDATE ON sa_entity
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_job_updated_at ON sa_job;
CREATE TRIGGER trg_sa_job_updated_at BEFORE UPDATE ON sa_job
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_operation_updated_at ON sa_operation;
CREATE TRIGGER trg_sa_operation_updated_at BEFORE UPDATE ON sa_operation
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_delivery_updated_at ON sa_delivery;
CREATE TRIGGER trg_sa_delivery_updated_at BEFORE UPDATE ON sa_delivery
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_chain_updated_at ON sa_chain;
CREATE TRIGGER trg_sa_chain_updated_at BEFORE UPDATE ON sa_chain
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
DROP TRIGGER trg_sa_chain_step_updated_at ON sa_chain_step;
CREATE TRIGGER trg_sa_chain_step_updated_at BEFORE UPDATE ON sa_chain_step
    FOR EACH ROW EXECUTE FUNCTION asterion_touch_updated_at();
