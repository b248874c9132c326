// Package flowctl is what operators see of flow control and how they steer it: each model's
// provider governor (limits in force, use, pauses), each org's running and queued work, its
// weight in the fair share, its pause and its budget, and the pauses operators set on an org
// or a model, each with its audit row.
//
// It is a package of its own because it joins the truths of three owners for one audience:
// the jobs (sa_job_count), the usage meter (budgets and totals) and the governor (models).
// None of them should know the others; this package only reads them, and writes only the two
// pauses operators own (with who set them, so that only an equal or higher role lifts one),
// and, when a model is resumed, wakes through River the vehicles of the jobs that waited for it.
package flowctl
