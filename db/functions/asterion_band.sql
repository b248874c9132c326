-- The River priority band a job priority falls in (jobs.RiverPriority), used by the index of
-- queued jobs per org: it must stay IMMUTABLE, and changing what it returns needs a REINDEX.
CREATE OR REPLACE FUNCTION asterion_band(p SMALLINT) RETURNS SMALLINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE WHEN p <= 10 THEN 1 WHEN p <= 40 THEN 2 WHEN p <= 59 THEN 3 ELSE 4 END)::smallint
$$;
