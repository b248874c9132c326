-- An edge is the fact that one entity flows to another; (kind, from_id, to_id), unique already,
-- is what names it. The surrogate id cost every edge (one a job) one more index entry and a
-- sequence step, and nothing looks an edge up by it.
ALTER TABLE sa_edge
    DROP CONSTRAINT sa_edge_pkey,
    DROP CONSTRAINT sa_edge_kind_from_id_to_id_key,
    ADD CONSTRAINT sa_edge_pkey PRIMARY KEY (from_id, to_id, kind);
ALTER TABLE sa_edge DROP COLUMN id;
