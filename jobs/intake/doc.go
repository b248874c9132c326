// Package intake puts a process's prompt submits first: the intake lane, which lets the
// process's workers yield to submits in flight and narrows their transactions while submits
// flow, and group commit, which gathers concurrent submits into shared transactions.
//
// Prompt execution (package jobs) reaches the lane through the small Gate interface and
// submits through a Group; both are switched in Config: a zero Yield turns the lane off, Solo
// turns group commit off.
package intake
