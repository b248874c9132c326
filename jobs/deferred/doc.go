// Package deferred is the portable deferred-operation contract (docs/architecture.md,
// "Deferred operations").
//
// It holds the two wire documents, deferred-operation.v1 (the Handle returned
// with 202 Accepted) and deferred-operation-status.v1 (the StatusDoc answered
// by GET <status_href>), their JSON Schemas (embedded, see ValidateHandle and
// ValidateStatus), the host Policy that clamps TTL and retry hints,
// deterministic operation ids (OperationID) and the tamper-evident status
// history (HistoryEntry, VerifyChain).
//
// The package is pure: it touches no database, clock or network. Callers pass
// the current time in, and the durable registry stores what this package
// produces.
package deferred
