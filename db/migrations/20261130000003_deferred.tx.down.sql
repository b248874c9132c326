DROP FUNCTION IF EXISTS asterion_compact_counts();
DROP TRIGGER IF EXISTS trg_sa_operation_count ON sa_operation;
DROP FUNCTION IF EXISTS asterion_count_operation();
DROP TABLE IF EXISTS sa_operation_count;
DROP TABLE IF EXISTS sa_operation_continuation;
DROP TABLE IF EXISTS sa_operation_history;
DROP TABLE IF EXISTS sa_operation;
