-- The estimate of a job that sets no max_tokens is the mean output of its model's last 100
-- attempts. Read through idx_attempt_finished, a model with few attempts walked every attempt
-- row of every model back to the first, on the submit path; this index reads its 100 alone.
CREATE INDEX idx_attempt_model_finished ON sa_attempt (model, finished_at);
