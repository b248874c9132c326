// Package output is a running job's live output: the text its provider call produces, stored
// as it arrives and followed by readers on every server process.
//
// A Writer (one per process that runs jobs) gathers the pieces of every execution it holds and
// stores them every FlushEvery (at most 250 ms) as one chunk per execution, numbered per
// attempt, all executions' chunks in one statement. A chunk is kept only while its job still
// runs the same attempt under the same claim, so a late writer's output is dropped like its
// result. The flush announces the range of rows it stored with one NOTIFY per flush, not per
// chunk, so output never goes through the change feed's sequencer and its cost grows with the
// number of flushes, not of chunks or readers.
//
// A Hub (one per server process) delivers chunks to its subscribers in order per job: chunks
// this process wrote come straight from its writer; other processes' are read back from the
// table by the announced range. A chunk out of order makes the hub read the missing ones from
// the table first, so no subscriber sees a gap, and a subscriber that falls behind is dropped
// and reads the table again, as change-feed readers do.
package output
