ALTER TABLE sa_operation
    DROP COLUMN IF EXISTS history_seq,
    DROP COLUMN IF EXISTS history_digest,
    DROP COLUMN IF EXISTS history_at;
