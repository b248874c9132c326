-- Two indexes of sa_entity that no statement reads any more, each an entry for both entities of
-- every job (its prompt and its response): the mission views find a user's prompts through
-- idx_entity_prompts (only prompts, org, creator and age, with the id), and nothing looks an
-- entity up by its correlation id.
DROP INDEX idx_entity_org_user_created;
DROP INDEX idx_entity_correlation;
