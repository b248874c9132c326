-- An event is inserted unnumbered and numbered once by the sequencer, which updates the row.
-- The unique index on seq used to hold an entry for every unnumbered version too, and those
-- entries stay until VACUUM. Asked for the unnumbered events, the planner (before statistics,
-- or whenever it thought them cheap) scanned that index for seq IS NULL with a bitmap scan, which
-- never marks dead entries, so every run of the sequencer visited every event numbered since the
-- last VACUUM: it slowed down the longer the server ran. Kept partial, the index holds numbered
-- events only; the unnumbered ones are found through idx_event_unsequenced alone, and a new
-- event costs one index entry less. Readers ask for seq > N, which implies seq IS NOT NULL.
ALTER TABLE sa_event DROP CONSTRAINT sa_event_seq_key;
CREATE UNIQUE INDEX sa_event_seq_key ON sa_event (seq) WHERE seq IS NOT NULL;
