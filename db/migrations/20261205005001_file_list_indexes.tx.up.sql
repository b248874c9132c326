-- GET /v1/files lists the files a caller may see, newest (or oldest) first, keyset-paged on
-- (created_at, id): an operator's every file of its org, a member's own (created_by). sa_file_org
-- held no id, so a page sorted the files of one second again, and a member's list walked every
-- file of its org to find its own.
DROP INDEX sa_file_org;
CREATE INDEX sa_file_org ON sa_file (org_id, created_at DESC, id DESC);
CREATE INDEX sa_file_creator ON sa_file (org_id, created_by, created_at DESC, id DESC);
