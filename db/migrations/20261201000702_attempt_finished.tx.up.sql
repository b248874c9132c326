-- The health page's tokens-per-minute chart reads the last hour of attempts of every org in
-- one grouped scan by finish time; the (org_id, finished_at) index serves one org only.
CREATE INDEX idx_attempt_finished ON sa_attempt (finished_at);
