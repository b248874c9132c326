// Package identity decides who a request acts as: orgs, users and their roles, argon2id
// passwords, bearer tokens stored as hashes, and browser sessions with their CSRF tokens.
//
// It is its own package because credential checks and role rules are neither queries (db) nor
// HTTP (handlers); both the command line and the server use it.
package identity
