ALTER TABLE sa_edge ADD COLUMN id BIGSERIAL;
ALTER TABLE sa_edge
    DROP CONSTRAINT sa_edge_pkey,
    ADD CONSTRAINT sa_edge_kind_from_id_to_id_key UNIQUE (kind, from_id, to_id),
    ADD CONSTRAINT sa_edge_pkey PRIMARY KEY (id);
