-- A dispatch finds the job on a fetched vehicle by its river_job_id, and then probes the queued
-- indexes. Partial on state, this index was also a candidate for every probe of queued jobs, and
-- when the statistics had last seen an empty queue the planner scanned all of it with a filter
-- instead of descending idx_job_queued_org. Whole, it serves only lookups by vehicle.
DROP INDEX idx_job_vehicle;
CREATE INDEX idx_job_vehicle ON sa_job (river_job_id);
