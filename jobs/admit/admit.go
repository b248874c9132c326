package admit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs/registry"
)

// Door names a way work enters. Every door passes the same rules; the name says in logs and
// tests which one a job came by.
type Door string

// The doors.
const (
	DoorSubmit    Door = "submit"     // POST /prompt, the compose bar, the command line
	DoorRetry     Door = "retry"      // a retry (supersede) by any route
	DoorChain     Door = "chain"      // a chain's first step, as the chain is accepted
	DoorChainStep Door = "chain_step" // a chain's later step, as the step before settles
	DoorFrontDoor Door = "front_door" // the OpenAI-compatible API
	DoorBatch     Door = "batch"      // one line of a batch
)

// Request is one job asking to be admitted.
type Request struct {
	Door Door
	// OrgID is the org the job will belong to (its budget and quota); UserID is who asks (its
	// submit rate).
	OrgID, UserID int64
	// Text is the prompt's text and TextField the field a text problem is reported on
	// ("prompt" when empty).
	Text      string
	TextField string
	// Model is the model asked for ("" for the default); Check sets it to the model the job
	// will run on.
	Model string
	// ScheduledFor, when set, is the earliest time the job may run; Check clears a time that
	// has already come.
	ScheduledFor *time.Time
	// Input is all the provider reads when that is more than Text (a conversation's messages,
	// of which Text is the last user message); the estimate counts its tokens. Empty: Text.
	Input string
	// MaxTokens, when positive, bounds the job's output; the estimate uses it.
	MaxTokens int

	// estimate is the job's reservation, set by Check.
	estimate int
	checked  bool
}

// Estimate is the reservation the request will carry against its org's budget once admitted
// (0 before Check).
func (r *Request) Estimate() int { return r.estimate }

// Ticket is the proof that a job was admitted: Reserve hands one out for each job it admits,
// and the job writer refuses a job without one. Tokens is the job's reservation.
type Ticket struct {
	tokens int
	valid  bool
}

// Valid says whether t came from Reserve.
func (t Ticket) Valid() bool { return t.valid }

// Tokens is the reservation the job carries against its org's budget.
func (t Ticket) Tokens() int { return t.tokens }

// Admission applies the rules of Config to every job that asks.
type Admission struct {
	cfg        Config
	rate       *submitRate
	means      meanOutputs
	unbudgeted unbudgeted
	starts     startBatch
}

// New validates cfg and returns an Admission.
func New(cfg Config) (*Admission, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Admission{cfg: cfg, rate: newSubmitRate(cfg.SubmitRate, cfg.Now),
		means: meanOutputs{byID: map[string]meanOutput{}}, unbudgeted: unbudgeted{until: map[int64]time.Time{}}}, nil
}

// Models are the models a job may ask for, the default first.
func (a *Admission) Models() []string { return slices.Clone(a.cfg.Models) }

// DefaultModel is the model of a job that asks for none.
func (a *Admission) DefaultModel() string { return a.cfg.Models[0] }

// Fields applies the admission's rules on r's fields (the text, the model, the schedule, the
// output bound) and returns a message for each field that breaks one, for a door that reports
// them together with its own. It changes nothing.
func (a *Admission) Fields(r *Request) map[string]string {
	fields := map[string]string{}
	field := r.TextField
	if field == "" {
		field = "prompt"
	}
	if msg := TextProblem(r.Text); msg != "" {
		fields[field] = msg
	}
	if _, msg := a.model(r.Model); msg != "" {
		fields["options.model"] = msg
	}
	if _, msg := schedule(r.ScheduledFor, a.cfg.Now()); msg != "" {
		fields["scheduled_for"] = msg
	}
	if r.MaxTokens < 0 {
		fields["options.max_tokens"] = "must be positive"
	}
	return fields
}

// Check applies the rules that need no transaction to r, in the order a person fixes them:
// the fields (r.Model becomes the model the job runs on, and a schedule already due is
// cleared), then the user's submit rate. A broken field rule is a *registry.ValidationError; a
// limit is a Refusal. Check also makes the job's estimate, which Reserve then reserves.
func (a *Admission) Check(ctx context.Context, r *Request) error {
	if fields := a.Fields(r); len(fields) > 0 {
		return &registry.ValidationError{Fields: fields}
	}
	r.Model, _ = a.model(r.Model)
	r.ScheduledFor, _ = schedule(r.ScheduledFor, a.cfg.Now())
	if err := a.rate.take(r.UserID); err != nil {
		return err
	}
	input := r.Text
	if r.Input != "" {
		input = r.Input
	}
	est, err := a.estimate(ctx, r.Model, input, r.MaxTokens)
	if err != nil {
		return fmt.Errorf("admit a job of org %d: %w", r.OrgID, err)
	}
	r.estimate, r.checked = est, true
	return nil
}

// RunsOn is the model a job asking for asked runs on: the deployment's default for none, and
// asked as it is otherwise (whether the deployment lists it is a field rule).
func (a *Admission) RunsOn(asked string) string {
	if asked == "" {
		return a.cfg.Models[0]
	}
	return asked
}

// model is the model a job asking for asked runs on, or a field message.
func (a *Admission) model(asked string) (string, string) {
	if asked == "" {
		return a.cfg.Models[0], ""
	}
	if !slices.Contains(a.cfg.Models, asked) {
		return "", "must be one of " + strings.Join(a.cfg.Models, ", ")
	}
	return asked, ""
}

// Grant is Reserve's answer for one request: a Ticket, or the refusal.
type Grant struct {
	Ticket Ticket
	Err    error
}

// errUnchecked refuses a request that did not pass Check first.
var errUnchecked = errors.New("admit: Reserve of a request that did not pass Check")

// allChecked refuses reqs unless every one passed Check.
func allChecked(reqs []*Request) error {
	for _, r := range reqs {
		if !r.checked {
			return errUnchecked
		}
	}
	return nil
}

// Reserve admits the checked requests reqs inside tx, the transaction that will write their
// jobs. An org at its queue quota (counting the requests of reqs admitted before) is refused.
// For each org with a budget it locks the budget and refuses the org's requests once the
// period's recorded usage plus the reservations of its accepted, unfinished jobs (those of reqs
// admitted before included) reaches the budget. Every other request gets its Ticket. The locks
// hold until tx ends, so the check and the reservation are one step across every process. A
// returned error means tx is unusable.
func (a *Admission) Reserve(ctx context.Context, tx bun.Tx, reqs []*Request) ([]Grant, error) {
	if err := allChecked(reqs); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return []Grant{}, nil
	}
	orgs := make([]int64, 0, len(reqs))
	for _, r := range reqs {
		orgs = append(orgs, r.OrgID)
	}
	now := a.cfg.Now().UTC()
	budgets, err := lockBudgets(ctx, tx, orgs, now)
	if err != nil {
		return nil, err
	}
	return a.grant(ctx, tx, reqs, budgets, now)
}

// grant decides each of reqs in order against the org's queue quota and the budgets read at
// now, counting the requests granted before it.
func (a *Admission) grant(ctx context.Context, tx bun.Tx, reqs []*Request, budgets map[int64]budgetRow, now time.Time) ([]Grant, error) {
	out := make([]Grant, len(reqs))
	standings := make(map[int64]*standing, len(budgets))
	active := map[int64]*int64{}
	for i, r := range reqs {
		if a.cfg.OrgMaxQueued > 0 {
			n := active[r.OrgID]
			if n == nil {
				count, err := a.activeJobs(ctx, tx, r.OrgID)
				if err != nil {
					return nil, err
				}
				n = &count
				active[r.OrgID] = n
			}
			if *n >= int64(a.cfg.OrgMaxQueued) {
				out[i].Err = &QuotaExceededError{Active: *n, Max: int64(a.cfg.OrgMaxQueued), Seconds: quotaRetryAfter}
				continue
			}
			*n++
		}
		if b, ok := budgets[r.OrgID]; ok {
			st := standings[r.OrgID]
			if st == nil {
				s, err := standingOf(b, now)
				if err != nil {
					return nil, err
				}
				st = &s
				standings[r.OrgID] = st
			}
			if st.full() {
				out[i].Err = st.refusal(now)
				if n := active[r.OrgID]; n != nil {
					*n--
				}
				continue
			}
			st.reserved += int64(r.estimate)
		}
		out[i].Ticket = Ticket{tokens: r.estimate, valid: true}
	}
	return out, nil
}

// Admit checks r and reserves it in tx: the one-job form of Check and Reserve for a door that
// queues its job inside a transaction it already holds.
func (a *Admission) Admit(ctx context.Context, tx bun.Tx, r *Request) (Ticket, error) {
	if err := a.Check(ctx, r); err != nil {
		return Ticket{}, err
	}
	g, err := a.Reserve(ctx, tx, []*Request{r})
	if err != nil {
		return Ticket{}, err
	}
	return g[0].Ticket, g[0].Err
}
