-- Fair share between orgs. A worker that fetched a River job looks up the job it carries by the
-- vehicle (a dispatch may have given it another org's job), finds the orgs with queued work by a
-- skip scan, probes an org's oldest queued job in a priority band, and counts an org's running
-- jobs. Each index is partial, so a job takes an entry only in the states it is looked up in.
CREATE INDEX idx_job_vehicle ON sa_job (river_job_id) WHERE state IN ('queued', 'running');
CREATE INDEX idx_job_queued_org ON sa_job (org_id, priority, created_at) WHERE state = 'queued';
CREATE INDEX idx_job_running_org ON sa_job (org_id) WHERE state = 'running';
