package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/chain"
	"asterion/jobs/deferred"
)

// ChainsPath is the base path of the chain API.
const ChainsPath = "/sa-core/v1/chains"

var chainFields = map[string]bool{"steps": true, "deferred_response_mode": true, "priority": true, "ttl_seconds": true}
var chainStepFields = map[string]bool{"prompt": true, "include_previous": true}

// decodeChain reads a POST /chains body strictly, like decodeSubmit: malformed JSON, a
// duplicate key or an unknown key (also inside a step) is a 400; a value of the wrong type is a
// 422 naming the field. The rules on values are the jobs package's.
func decodeChain(body []byte) (chain.Request, *decodeError) {
	var req chain.Request
	var top map[string]json.RawMessage
	if err := strictObject(body, &top); err != nil {
		return req, &decodeError{status: 400, detail: "the body must be one JSON object: " + err.Error()}
	}
	if unknown := unknownKeys(top, chainFields); len(unknown) > 0 {
		return req, &decodeError{status: 400, detail: "unknown field(s): " + strings.Join(unknown, ", ")}
	}
	fields := map[string]string{}
	var steps []json.RawMessage
	if raw, ok := top["steps"]; !ok || isNull(raw) {
		fields["steps"] = "is required"
	} else if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' || json.Unmarshal(raw, &steps) != nil {
		fields["steps"] = fmt.Sprintf("must be an array of 1..%d steps", chain.MaxSteps)
	}
	for i, raw := range steps {
		name := fmt.Sprintf("steps[%d]", i)
		var st map[string]json.RawMessage
		if err := strictObject(raw, &st); err != nil {
			if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
				return req, &decodeError{status: 400, detail: name + ": " + err.Error()}
			}
			fields[name] = "must be an object"
			continue
		}
		if unknown := unknownKeys(st, chainStepFields); len(unknown) > 0 {
			return req, &decodeError{status: 400, detail: "unknown field(s) in " + name + ": " + strings.Join(unknown, ", ")}
		}
		var step chain.Step
		if p, ok := st["prompt"]; !ok || isNull(p) {
			fields[name+".prompt"] = "is required"
		} else if err := json.Unmarshal(p, &step.Prompt); err != nil {
			fields[name+".prompt"] = "must be a string"
		}
		if p, ok := st["include_previous"]; ok && !isNull(p) {
			if err := json.Unmarshal(p, &step.IncludePrevious); err != nil {
				fields[name+".include_previous"] = "must be a boolean"
			}
		}
		req.Steps = append(req.Steps, step)
	}
	if raw, ok := top["deferred_response_mode"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.Mode); err != nil || req.Mode == "" {
			fields["deferred_response_mode"] = `must be "suspend" or "reject-as-failure"`
		}
	}
	req.Priority = intField(top, "priority", fields)
	req.TTLSeconds = intField(top, "ttl_seconds", fields)
	if len(fields) > 0 {
		return req, &decodeError{status: 422, detail: "the request breaks one or more field rules", fields: fields}
	}
	return req, nil
}

// chainStepJSON is one step as the API shows it: state and ids, never its text.
type chainStepJSON struct {
	Step            int        `json:"step"`
	IncludePrevious bool       `json:"include_previous"`
	State           string     `json:"state"`
	PromptID        *uuid.UUID `json:"prompt_id"`
	JobID           *uuid.UUID `json:"job_id"`
	OperationID     *uuid.UUID `json:"operation_id"`
	OperationStatus *string    `json:"operation_status"`
	ResponseID      *uuid.UUID `json:"response_id"`
	UpdatedAt       string     `json:"updated_at"`
}

// chainJSON is the chain document of GET /chains/{id}: never the continuation, only its digest.
type chainJSON struct {
	ChainID            uuid.UUID          `json:"chain_id"`
	State              string             `json:"state"`
	Mode               string             `json:"deferred_response_mode"`
	Priority           int                `json:"priority"`
	StepCount          int                `json:"step_count"`
	CurrentStep        int                `json:"current_step"`
	CreatedAt          string             `json:"created_at"`
	UpdatedAt          string             `json:"updated_at"`
	FinishedAt         *string            `json:"finished_at"`
	OperationID        uuid.UUID          `json:"operation_id"`
	StatusHref         string             `json:"status_href"`
	Operation          deferred.StatusDoc `json:"operation"`
	Result             json.RawMessage    `json:"result"`
	Diagnostic         json.RawMessage    `json:"diagnostic"`
	ContinuationDigest *string            `json:"continuation_digest"`
	DiagnosticsDigest  *string            `json:"diagnostics_digest"`
	Steps              []chainStepJSON    `json:"steps"`
}

func toChainJSON(d chain.Detail) chainJSON {
	c := d.Chain
	out := chainJSON{ChainID: c.ID, State: c.State, Mode: c.Mode, Priority: c.Priority, StepCount: c.StepCount,
		CurrentStep: c.CurrentStep, CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt), FinishedAt: tsp(c.FinishedAt),
		OperationID: c.OperationID, StatusHref: deferred.StatusHref(c.OperationID), Operation: d.Status,
		Result: nullJSON(c.Result), Diagnostic: nullJSON(c.Diagnostic), ContinuationDigest: d.Operation.ContinuationDigest,
		DiagnosticsDigest: d.Operation.DiagnosticsDigest, Steps: make([]chainStepJSON, len(d.Steps))}
	for i, st := range d.Steps {
		s := chainStepJSON{Step: st.Step, IncludePrevious: st.IncludePrevious, State: st.State, PromptID: st.PromptID,
			JobID: st.JobID, OperationID: st.OperationID, ResponseID: st.ResponseID, UpdatedAt: ts(st.UpdatedAt)}
		if st.OperationStatus != "" {
			v := st.OperationStatus
			s.OperationStatus = &v
		}
		out.Steps[i] = s
	}
	return out
}

func nullJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// submitChain is POST /sa-core/v1/chains: 202 with the chain's deferred-operation.v1 handle
// (Location: its status_href, Retry-After), or, for a reject-as-failure chain, 201 with the
// failed chain document (Location: the chain).
func (s *Server) submitChain(c *fiber.Ctx) error {
	if ct := strings.ToLower(c.Get(fiber.HeaderContentType)); !strings.HasPrefix(ct, fiber.MIMEApplicationJSON) {
		return problem(c, fiber.StatusUnsupportedMediaType, "the body must be application/json")
	}
	req, derr := decodeChain(c.Body())
	if derr != nil {
		if derr.status == fiber.StatusUnprocessableEntity {
			return validationProblem(c, derr.fields)
		}
		return problem(c, derr.status, derr.detail)
	}
	req.Viewer = viewerOf(principalOf(c))
	req.IdempotencyKey = c.Get("Idempotency-Key")
	if _, present := c.GetReqHeaders()["Idempotency-Key"]; present && req.IdempotencyKey == "" {
		return validationProblem(c, map[string]string{"Idempotency-Key": "must be 1..255 visible ASCII characters"})
	}
	out, err := s.deps.Chains.Submit(c.UserContext(), req)
	if err != nil {
		return s.jobsError(c, err)
	}
	chainHref := ChainsPath + "/" + out.Chain.ID.String()
	if out.Rejected {
		d, err := s.deps.Chains.Get(c.UserContext(), req.Viewer, out.Chain.ID)
		if err != nil {
			return s.jobsError(c, err)
		}
		c.Set(fiber.HeaderLocation, chainHref)
		return c.Status(fiber.StatusCreated).JSON(toChainJSON(d))
	}
	h := out.Operation
	op, retry, err := s.acceptedHandle(c.UserContext(), h, nil)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderLocation, h.StatusHref)
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retry))
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{
		"chain_id": out.Chain.ID, "state": out.Chain.State, "chain_href": chainHref, "operation": op,
	})
}

// getChain is GET /sa-core/v1/chains/{id}: the chain with its steps' states.
func (s *Server) getChain(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such chain")
	}
	d, err := s.deps.Chains.Get(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		if errors.Is(err, jobs.ErrNotFound) {
			return problem(c, fiber.StatusNotFound, "no such chain")
		}
		return s.jobsError(c, err)
	}
	if !d.Status.Terminal() {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(d.Status.RetryAfterSeconds))
	}
	return c.JSON(toChainJSON(d))
}
