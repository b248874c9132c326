package jobs

import "github.com/google/uuid"

// ClaimStatement is the statement of a claim of jobID on vehicle under claim, and
// SuccessStatement that of its success, with their arguments.
func ClaimStatement(jobID uuid.UUID, vehicle int64, claim string) (string, []any) {
	return claimChange(jobID, vehicle, claim).statement()
}

// SuccessStatement: see ClaimStatement.
func SuccessStatement(jobID uuid.UUID, claim string) (string, []any) {
	return change{jobID: jobID, from: []State{StateRunning}, to: StateSucceeded, claim: claim}.statement()
}

// WatchTransitions makes every transition of s tell f its label and the text of its job
// UPDATE, until the returned function is called.
func WatchTransitions(s *Service, f func(label, query string)) (stop func()) {
	return watchTransitions(s, f)
}
