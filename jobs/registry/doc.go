// Package registry is the durable, operator-visible join point of deferred operations: the
// sa_operation read model and its digest-chained status history (head kept on the row), the
// poller that reconciles due operations with their owners, expiry, the cancel bridge, and the
// store of host-owned continuations.
//
// The registry knows no operation kind. Every kind is owned by a runtime that implements Owner
// and registers itself (Register); the registry reaches owners only through that interface.
// Owners that suspend on another operation keep continuations here and implement Resumer, and
// components that act when an operation settles subscribe with OnSettled. The owner stays the
// source of truth about its work; the registry records what owners report and what they
// mirror onto the row in their own transactions.
package registry
