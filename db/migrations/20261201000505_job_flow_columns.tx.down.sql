ALTER TABLE sa_job_archive DROP COLUMN scheduled_for, DROP COLUMN waiting_for, DROP COLUMN cancel_outcome;
ALTER TABLE sa_job DROP COLUMN scheduled_for, DROP COLUMN waiting_for, DROP COLUMN cancel_outcome;
