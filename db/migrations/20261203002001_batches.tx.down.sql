DROP TABLE sa_job_door;
DROP TABLE sa_batch_request;
DROP TABLE sa_batch;
DROP TABLE sa_file_line;
DROP TABLE sa_file;
