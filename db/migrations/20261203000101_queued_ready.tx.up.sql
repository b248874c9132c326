-- Fair share chooses the org first, among the orgs with queued work to choose: a due job not
-- waiting for the provider or for a budget (jobs/fairshare). This index holds exactly the
-- queued jobs not waiting, by org and scheduled_at, so that one descent per org finds the org's
-- earliest scheduled_at: whether it has due work, however many jobs it scheduled for later or
-- left waiting. The dispatch's others probe and its ranking of orgs walk it one org at a time.
CREATE INDEX idx_job_queued_ready ON sa_job (org_id, scheduled_at)
    WHERE state = 'queued' AND (waiting_for IS NULL OR waiting_for NOT IN ('provider_capacity', 'budget'));
-- The jobs marked waiting for the provider or a budget, by vehicle: the leader clears the mark
-- of those whose vehicle has woken (jobs/fairshare/wake.go), so it walks only them.
CREATE INDEX idx_job_queued_waiting ON sa_job (river_job_id)
    WHERE state = 'queued' AND waiting_for IN ('provider_capacity', 'budget');
