DROP TABLE sa_job_output_archive;
DROP TABLE sa_job_output;
