package handlers

import (
	"fmt"

	"asterion/handlers/openai"
	"asterion/jobs"
	"asterion/jobs/batch"
	"asterion/jobs/chain"
)

// Owners are the operation owners the front door serves over one jobs.Service: the chains of
// flow.chain and the batches of the OpenAI batch API.
type Owners struct {
	Chains  *chain.Chains
	Batches *batch.Batches
}

// NewOwners builds the owners over svc and registers them with it (its registry, and the
// batches' worker on the pools built from svc afterwards). It is the one place they are built:
// a process builds them once, with its jobs service, and passes them to New in Deps.
func NewOwners(svc *jobs.Service) (Owners, error) {
	chains, err := chain.New(chain.Config{Jobs: svc})
	if err != nil {
		return Owners{}, fmt.Errorf("build the chain owner: %w", err)
	}
	batches, err := batch.New(batch.Config{Jobs: svc, Endpoints: openai.BatchEndpoints()})
	if err != nil {
		return Owners{}, fmt.Errorf("build the batch owner: %w", err)
	}
	return Owners{Chains: chains, Batches: batches}, nil
}
