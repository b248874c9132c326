-- The head of each operation's history chain lives on the registry row itself, so a status
-- change chains its entry without reading the history back, and a reader can tell a truncated
-- history (its last entry is not the head) from a complete one.
ALTER TABLE sa_operation
    ADD COLUMN history_seq    BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN history_digest TEXT NULL,
    ADD COLUMN history_at     TIMESTAMPTZ NULL;

UPDATE sa_operation o
SET history_seq = h.seq, history_digest = h.entry_digest, history_at = h.at
FROM (
    SELECT DISTINCT ON (operation_id) operation_id, seq, entry_digest, at
    FROM sa_operation_history
    ORDER BY operation_id, seq DESC
) h
WHERE h.operation_id = o.id;
