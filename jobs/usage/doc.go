// Package usage counts what prompts cost: the tokens of every attempt that reached the
// provider, priced from the deployment's table, summed per job, per org and model, and
// checked against each org's token budget for the current UTC day or month.
//
// Every attempt writes one row and bumps its org's running totals for the day and the month in
// the same statement, so a submit learns whether its org's budget is spent from one indexed
// read, however long the history.
package usage
