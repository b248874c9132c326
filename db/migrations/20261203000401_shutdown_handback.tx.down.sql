DROP TABLE sa_worker_drain;
UPDATE sa_job SET error_kind = 'worker_crash' WHERE error_kind = 'shutdown';
ALTER TABLE sa_job DROP CONSTRAINT sa_job_error_kind_check;
ALTER TABLE sa_job ADD CONSTRAINT sa_job_error_kind_check CHECK (error_kind IN ('timeout', 'rate_limit',
    'provider_5xx', 'provider_4xx', 'parse', 'auth', 'worker_crash', 'stuck', 'unknown', 'expired'));
