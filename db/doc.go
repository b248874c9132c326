// Package db owns Asterion's PostgreSQL side: connection settings, opening bun over pgdriver
// (with the database created when missing and a bounded wait for the server), the embedded app
// migrations next to River's, the bun models of every table, and the store layer that writes
// the hot rows: one file per entity holding its INSERT and UPDATE as named SQL texts with their
// parameters (Statement), and Batch, which sends a transaction's writes in one round trip, as
// one prepared statement where it can.
package db
