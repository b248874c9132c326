// Package readmodel is the read side of the service: what the API and the pages show of
// prompt jobs and deferred operations. It holds the list queries with their filters and
// cursors, the rule a live list uses to decide whether a changed row still belongs to it
// (JobFilter.Matches, OperationFilter.Matches) and how a change-feed event changes a row
// (JobAsOf, OperationAsOf), the counts, the job and operation details, the mission field, the
// dashboard's series and liveness, and the queue metrics, each limited to what a jobs.Viewer
// may see. It writes nothing; prompt execution (package jobs) and the registry own the writes.
package readmodel
