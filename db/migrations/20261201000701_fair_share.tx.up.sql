-- Fair share between orgs. A worker that fetched a River job looks up the job it carries by the
-- vehicle (a dispatch may have given it another org's job), finds the orgs with queued work by a
-- skip scan, probes an org's oldest queued job in a River priority band, and counts an org's
-- running jobs. Each index is partial, so a job takes an entry only in the states it is looked up
-- in. asterion_band is jobs.RiverPriority: the band a job priority falls in.
CREATE FUNCTION asterion_band(p SMALLINT) RETURNS SMALLINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE WHEN p <= 10 THEN 1 WHEN p <= 40 THEN 2 WHEN p <= 59 THEN 3 ELSE 4 END)::smallint
$$;
CREATE INDEX idx_job_vehicle ON sa_job (river_job_id) WHERE state IN ('queued', 'running');
CREATE INDEX idx_job_queued_org ON sa_job (org_id, asterion_band(priority), created_at) WHERE state = 'queued';
CREATE INDEX idx_job_running_org ON sa_job (org_id) WHERE state = 'running';
