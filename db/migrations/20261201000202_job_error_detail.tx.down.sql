DROP TABLE IF EXISTS sa_job_error;
