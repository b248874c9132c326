-- A reconnecting stream replays the events of its scope after its Last-Event-ID: a member's
-- own (org and user), an operator's org, an admin's all. Walking the feed's seq index from that
-- point and filtering by scope reads every other tenant's events too, the whole retained feed
-- for Last-Event-ID 1. These indexes hold each scope's events in seq order, so a replay reads
-- only its own. Partial like sa_event_seq_key: an unnumbered event takes no entry until the
-- sequencer numbers it.
CREATE INDEX idx_event_org_user_seq ON sa_event (org_id, user_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX idx_event_org_seq ON sa_event (org_id, seq) WHERE seq IS NOT NULL;

-- The mission field shows the first 1000 characters of each text (jobs.MissionTextCap). Cutting
-- a long body with left() fetches its first TOAST chunks, several index lookups per text, for
-- every drop of every field read: most of the read's time. body_head keeps, for a body longer
-- than that, its first 1001 characters (one more tells a cut text from a whole one) inline in
-- the row; a shorter body needs none, being its own head. Adding it rewrites sa_entity once.
ALTER TABLE sa_entity ADD COLUMN body_head TEXT
    GENERATED ALWAYS AS (CASE WHEN length(body) > 1000 THEN left(body, 1001) END) STORED;
