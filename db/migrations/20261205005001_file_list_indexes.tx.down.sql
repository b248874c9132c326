DROP INDEX sa_file_creator;
DROP INDEX sa_file_org;
CREATE INDEX sa_file_org ON sa_file (org_id, created_at DESC);
