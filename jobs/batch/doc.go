// Package batch runs the files and batches of the OpenAI-compatible front door: a JSONL file of
// requests becomes one Asterion job per line, at the lowest priority of its org, each admitted
// by the one admission like any submit, and the answers are gathered into an output file and an
// error file. It knows nothing of HTTP nor of OpenAI's wire shapes: an Endpoint (given by the
// front door) reads a line's body and writes the body of its answer.
//
// Files are kept in PostgreSQL as their lines (sa_file, sa_file_line), written and read in
// chunks of ChunkLines, so neither an upload of the largest file nor a batch of the most lines
// is ever held whole in memory.
//
// A batch is a deferred operation of kind flow.batch (owner "batch"): its registry row is
// written as it is accepted and settled when it ends. Its work is done in the background by a
// River job (batch.advance) that visits every unfinished batch, one step at a time:
//
//	validating  → in_progress  the input file is usable (otherwise failed)
//	in_progress                ChunkLines lines become jobs (or error lines) per transaction,
//	                           and expanded_lines records how far it went, so a crash resumes
//	                           there; once every line is expanded and every job has ended:
//	            → finalizing   the output and error files are written, chunk by chunk
//	            → completed
//	cancelling  → cancelled    (or expired, when its window ran out) once every unfinished job
//	                           is cancelled; the files hold what had been answered by then.
package batch
