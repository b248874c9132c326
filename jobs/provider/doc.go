// Package provider is the LLM provider boundary of the job runner.
//
// A Provider turns one prompt attempt (a Request) into either a Response or
// an *Error whose Kind is one of the error kinds (errors.go).
// The worker never inspects transport details: it calls Classify on any
// error from Complete and decides retry and backoff from the kind alone.
//
// Two providers exist. Sim is the built-in simulated provider that needs no
// account and no network; prompts steer it with "#sim:" directives (see
// ParseDirectives). OpenAI speaks the OpenAI-compatible chat-completions
// protocol. FromEnv picks one from the ASTERION_* environment variables.
package provider
