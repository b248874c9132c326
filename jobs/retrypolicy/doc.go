// Package retrypolicy decides what becomes of a prompt job after a failed attempt: retried
// after a delay, or failed. Retryable kinds (timeout, rate limit, a provider's 5xx, unknown)
// are retried while attempts remain, after an exponential backoff with jitter (Backoff); a
// rate limit waits for the provider's Retry-After, bounded by the longest pause one provider
// answer may hold, or at least RateLimitFloor without one; every other kind, and an exhausted
// attempt budget, fails the job.
//
// It is a package of its own because the rules are pure functions of the provider's error, the
// attempts and a random source, with no state and no database: the worker of package jobs asks
// Decide once per failed attempt and writes the re-queue or the failure itself.
package retrypolicy
