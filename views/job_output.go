package views

// JobOutput is what a prompt job's current attempt has written so far, as a detail page (the
// job's or its operation's) shows it.
type JobOutput struct {
	// JobID is the job that wrote it; the API serves all of it there.
	JobID string
	// Text is the output so far (its head, when Cut).
	Text string
	Cut  bool
	// Chunks and Tokens are the job's progress.
	Chunks, Tokens int
	// Shown says the page shows the section: some output was written, or the job runs.
	Shown bool
}
