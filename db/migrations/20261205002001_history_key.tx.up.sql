-- A history entry is found by its operation and its place in that operation's chain, never by a
-- number of its own: the surrogate id cost every entry (three a job) one more index entry and a
-- sequence step. (operation_id, seq), unique already, becomes the primary key.
ALTER TABLE sa_operation_history
    DROP CONSTRAINT sa_operation_history_pkey,
    DROP CONSTRAINT sa_operation_history_operation_id_seq_key,
    ADD CONSTRAINT sa_operation_history_pkey PRIMARY KEY (operation_id, seq);
ALTER TABLE sa_operation_history DROP COLUMN id;
