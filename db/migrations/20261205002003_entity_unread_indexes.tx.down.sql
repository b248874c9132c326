CREATE INDEX idx_entity_org_user_created ON sa_entity (org_id, created_by, created_at);
CREATE INDEX idx_entity_correlation ON sa_entity (correlation_id);
