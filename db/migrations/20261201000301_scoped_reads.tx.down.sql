ALTER TABLE sa_entity DROP COLUMN IF EXISTS body_head;
DROP INDEX IF EXISTS idx_event_org_seq;
DROP INDEX IF EXISTS idx_event_org_user_seq;
