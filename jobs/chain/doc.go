// Package chain is the owner of flow.chain operations: ordered prompt steps, where a step may
// include the previous step's response. It registers with the registry as the owner of its kind
// and as the Resumer of its continuations, and submits each step as a prompt through jobs.
//
// Acceptance (Submit, one transaction): the chain's registry row (kind flow.chain,
// status running, subject chain_id, cancelable), its sa_chain and sa_chain_step rows, and the
// prompt of step 1 submitted like any prompt (prompt entity, queued job, prompt.execute
// operation, River job). The chain then suspends on step 1's operation: its continuation —
// chain id, the step it waits for, every step's text and the responses so far — is stored as
// host-owned state in sa_operation_continuation, keyed by that operation, and only its SHA-256
// digest is written on the registry rows (the step's operation and the chain's). The steps'
// texts are nowhere else until they are submitted: sa_chain_step has states and ids only.
//
// Resumption. When the awaited operation settles, the registry (registry.Settle) takes
// the continuation in the same transaction and hands it to the chain owner's Resume:
//
//	completed, not the last step → the next step is submitted (its text, then, when it has
//	                               include_previous, "\n\nPrevious response:\n" and the previous
//	                               response's text) and the chain suspends on it;
//	completed, the last step     → the chain completes with {chain_id, responses};
//	failed, timed-out, cancelled,
//	expired, unknown             → the chain fails with a diagnostic naming the step and that
//	                               status (error kind "step_<status>"); the diagnostic is kept
//	                               on sa_chain and its digest on the registry row.
//
// deferred_response_mode "reject-as-failure" asks for synchronous semantics: every prompt step
// is a deferred operation, so such a chain fails at acceptance with a diagnostic instead of
// suspending, and submits nothing.
//
// Cancel (cancel_href of the chain) marks the chain cancelled and cancels the running step's
// job; expiry does the same with error kind expired. A step whose job is being finalised at
// that very moment cannot be cancelled: the answer is the reason, and a retry succeeds.
//
// Chain status mapping (sa_chain.state → registry status):
//
//	running → running (cancel_href), completed → completed, failed → failed,
//	cancelled → cancelled, expired → expired; no chain row → unknown.
package chain
