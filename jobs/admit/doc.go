// Package admit is the one admission every way work enters Asterion passes: a submit over the
// API, the mission page's compose bar, a retry from the API, the mission page, the dashboard
// or its bulk action, a chain and each step it queues, and the OpenAI-compatible front door.
//
// It is a package of its own so that no door can hold a rule of its own or skip one: the text
// rules, the deployment's model list, the schedule's bounds, each user's submit rate, each
// org's queue quota and its token budget live here and nowhere else, and the job writer of
// package jobs refuses to queue a job that carries no Ticket, which only Reserve hands out.
//
// Admission has two steps. Check applies the rules that need no transaction (text, model,
// schedule, rate, quota) before the door opens one. Reserve runs inside the transaction that
// writes the jobs: with the org's budget row locked, it reads the period's recorded usage and
// the reservations of the org's accepted, unfinished jobs, refuses once their sum reaches the
// budget, and otherwise gives each job its reservation (its estimate), which the transaction
// writes on the job. The lock makes the check and the reservation one step across every
// process; the reservation is settled by the job itself, which stops counting as unfinished in
// the transaction that finishes it, while its attempts' usage is recorded. Start applies the
// budget once more when a job is about to run: it starts only while the usage plus the
// reservations of the org's running jobs is below the budget.
//
// A refusal is an error that satisfies Refusal: the kind of limit (the last part of the
// problem type a door answers with) and how many seconds to wait before asking again.
package admit
