// Package db owns Asterion's PostgreSQL side: connection settings, opening bun over pgdriver
// (with the database created when missing and a bounded wait for the server), the embedded app
// migrations next to River's, the bun models of every table and the stores that query them.
package db
