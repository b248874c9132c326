// Package db owns Asterion's PostgreSQL side: connection settings, opening bun over pgdriver
// (with the database created when missing and a bounded wait for the server), the embedded app
// migrations next to River's, the PL/pgSQL and SQL functions (db/functions, one file per
// function, applied after the migrations whenever their text changes), the bun models of every table, and the store layer that writes
// the hot rows.
//
// The store layer has one file per entity (entity.go, job.go, operation.go, ...) holding its
// INSERT, and the registry row's UPDATE, as named SQL texts with the arguments that fill them
// (Statement). A transaction's writes go through Writes, which collects them and sends them in
// one round trip, as one prepared statement where it can (Batch is how it composes them), and
// which sends them before any read made through it.
package db
