ALTER TABLE sa_operation_history ADD COLUMN id BIGSERIAL;
ALTER TABLE sa_operation_history
    DROP CONSTRAINT sa_operation_history_pkey,
    ADD CONSTRAINT sa_operation_history_operation_id_seq_key UNIQUE (operation_id, seq),
    ADD CONSTRAINT sa_operation_history_pkey PRIMARY KEY (id);
