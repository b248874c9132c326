-- The conversation of a prompt submitted as messages (an array of {"role","content"}, the last
-- one the user message that is also the entity's body); NULL for a prompt submitted as text and
-- for every other kind of entity.
ALTER TABLE sa_entity ADD COLUMN messages JSONB NULL;
