package handlers

import (
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/readmodel"
)

// jobJSON is the wire form of a job.
type jobJSON struct {
	JobID        uuid.UUID  `json:"job_id"`
	PromptID     uuid.UUID  `json:"prompt_id"`
	State        string     `json:"state"`
	Priority     int        `json:"priority"`
	Attempt      int        `json:"attempt"`
	MaxAttempts  int        `json:"max_attempts"`
	ErrorKind    *string    `json:"error_kind"`
	ErrorMessage *string    `json:"error_message"`
	Supersedes   *uuid.UUID `json:"supersedes"`
	ResponseID   *uuid.UUID `json:"response_id"`
	OperationID  *uuid.UUID `json:"operation_id"`
	WorkerClaim  *string    `json:"worker_claim"`
	OrgID        int64      `json:"org_id"`
	CreatedBy    int64      `json:"created_by"`
	CreatedAt    string     `json:"created_at"`
	UpdatedAt    string     `json:"updated_at"`
	ScheduledAt  string     `json:"scheduled_at"`
	ClaimedAt    *string    `json:"claimed_at"`
	StartedAt    *string    `json:"started_at"`
	HeartbeatAt  *string    `json:"running_heartbeat_at"`
	FinishedAt   *string    `json:"finished_at"`
	// ScheduledFor, WaitingFor and CancelOutcome are the job document's later fields: the time a
	// scheduled prompt asked for, why a queued job waits, how a cancel landed.
	ScheduledFor  *string `json:"scheduled_for"`
	WaitingFor    *string `json:"waiting_for"`
	CancelOutcome *string `json:"cancel_outcome"`
}

func ts(t time.Time) string { return deferred.FormatTime(t) }

func tsp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}

func toJobJSON(j db.Job) jobJSON {
	return jobJSON{JobID: j.ID, PromptID: j.PromptID, State: j.State, Priority: j.Priority, Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, ErrorKind: j.ErrorKind, ErrorMessage: j.ErrorMessage, Supersedes: j.Supersedes,
		ResponseID: j.ResponseID, OperationID: j.OperationID, WorkerClaim: j.WorkerClaim, OrgID: j.OrgID,
		CreatedBy: j.CreatedBy, CreatedAt: ts(j.CreatedAt), UpdatedAt: ts(j.UpdatedAt), ScheduledAt: ts(j.ScheduledAt),
		ClaimedAt: tsp(j.ClaimedAt), StartedAt: tsp(j.StartedAt), HeartbeatAt: tsp(j.RunningHeartbeatAt),
		FinishedAt: tsp(j.FinishedAt), ScheduledFor: tsp(j.ScheduledFor), WaitingFor: j.WaitingFor,
		CancelOutcome: j.CancelOutcome}
}

// missionItemJSON is one item of mission/recent (docs/api.md).
type missionItemJSON struct {
	PromptID uuid.UUID  `json:"prompt_id"`
	ParentID *uuid.UUID `json:"parent_id"`
	Text     string     `json:"text"`
	// TextTruncated marks a text cut to its first readmodel.MissionTextCap characters; the
	// whole is the job document's prompt_text (a response's: the job's output).
	TextTruncated bool             `json:"text_truncated,omitempty"`
	CreatedAt     string           `json:"created_at"`
	Job           missionJobJSON   `json:"job"`
	Response      *missionRespJSON `json:"response"`
}

type missionJobJSON struct {
	JobID        uuid.UUID `json:"job_id"`
	State        string    `json:"state"`
	Priority     int       `json:"priority"`
	Attempt      int       `json:"attempt"`
	MaxAttempts  int       `json:"max_attempts"`
	ErrorKind    *string   `json:"error_kind"`
	ErrorMessage *string   `json:"error_message"`
	UpdatedAt    string    `json:"updated_at"`
}

type missionRespJSON struct {
	ResponseID    uuid.UUID `json:"response_id"`
	Text          string    `json:"text"`
	TextTruncated bool      `json:"text_truncated,omitempty"`
	CreatedAt     string    `json:"created_at"`
}

func toMissionItem(it readmodel.MissionItem) missionItemJSON {
	out := missionItemJSON{PromptID: it.Prompt.ID, ParentID: it.Prompt.ParentID, Text: it.Prompt.Body, TextTruncated: it.TextCut,
		CreatedAt: ts(it.Prompt.CreatedAt), Job: missionJobJSON{JobID: it.Job.ID, State: it.Job.State,
			Priority: it.Job.Priority, Attempt: it.Job.Attempt, MaxAttempts: it.Job.MaxAttempts,
			ErrorKind: it.Job.ErrorKind, ErrorMessage: it.Job.ErrorMessage, UpdatedAt: ts(it.Job.UpdatedAt)}}
	if it.Response != nil {
		out.Response = &missionRespJSON{ResponseID: it.Response.ID, Text: it.Response.Body, TextTruncated: it.ResponseCut,
			CreatedAt: ts(it.Response.CreatedAt)}
	}
	return out
}
