// Package reliability is the fault-injection suite: it runs the built asterion binary (serve and
// run-worker subprocesses) against real PostgreSQL and real HTTP, breaks things on purpose
// (SIGKILLed workers, a restarted database, a misbehaving provider, an offer above what the
// workers drain) and checks the guarantees of docs/guarantees.md afterwards by SQL and over the API.
//
// It is a package of its own because it belongs to none of the layout's homes: it tests the
// whole system from outside, across processes, and imports only what a test needs to set up a
// database and a user. It holds tests only; this file carries the package comment.
//
// The suite runs only when ASTERION_RELIABILITY is set: "short" for CI (about three minutes)
// or "long" on demand. Without it every test skips, so `go test ./...` stays fast.
package reliability
