DROP INDEX sa_event_seq_key;
ALTER TABLE sa_event ADD CONSTRAINT sa_event_seq_key UNIQUE (seq);
