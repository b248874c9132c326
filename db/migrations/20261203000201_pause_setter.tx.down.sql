DROP FUNCTION asterion_governor_observe(TEXT, INTEGER, INTEGER, DOUBLE PRECISION, INTEGER, INTEGER, BOOLEAN, DOUBLE PRECISION);

ALTER TABLE sa_org_share
    DROP COLUMN paused_actor,
    DROP COLUMN paused_role,
    DROP COLUMN paused_by;

ALTER TABLE sa_governor
    DROP COLUMN paused_actor,
    DROP COLUMN paused_role,
    DROP COLUMN paused_by;
