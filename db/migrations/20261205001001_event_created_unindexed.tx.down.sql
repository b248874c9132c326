CREATE INDEX idx_event_created ON sa_event (created_at);
