// Package governor shares one provider account's capacity between every process on the
// database: requests and tokens per minute for each model, configured or learned from what the
// provider reports, with pauses after a 429 or an exhausted limit that hold every process. One
// provider answer holds a model for at most MaxPause (any member can make a provider say
// "wait", and the wait holds every org); an operator's pause holds it until resumed, and a
// resume ends both.
//
// The state is one row per model in PostgreSQL (the processes share nothing else), changed
// under its row lock by one function call per reservation, so two processes can never both
// take the last slot. The limiter is GCRA (a token bucket kept as a theoretical arrival time)
// with a burst of two requests, which bounds the calls started in any window of w seconds to
// ceil(RPM × w / 60) + 2. A reservation is made only within a short horizon; a caller told to
// wait spends no attempt, holds no database connection while it waits, and asks again when
// the slot is due. Idle, the governor runs no statement at all.
package governor
