CREATE INDEX idx_prompt ON sa_job (prompt_id);
DROP INDEX idx_job_prompt_newest;
DROP INDEX idx_entity_prompts;
