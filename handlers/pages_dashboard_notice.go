package handlers

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"asterion/views"
)

// dashNotices are the fixed messages an action's redirect may ask a page to show.
var dashNotices = map[string]views.Notice{
	"op-cancelled":    {Tone: "ok", Text: "Cancelled: the owner stopped the operation."},
	"op-polled":       {Tone: "ok", Text: "Polled the owning runtime; the status below is current."},
	"op-finished":     {Tone: "error", Text: "The operation had already finished; nothing was cancelled."},
	"job-cancelled":   {Tone: "ok", Text: "Cancelled the job."},
	"job-retried":     {Tone: "ok", Text: "Retried: this new job supersedes the old one."},
	"op-retried":      {Tone: "ok", Text: "Retried: this is the operation of the new job, which supersedes the old one."},
	"job-finished":    {Tone: "error", Text: "The job had already finished; nothing was cancelled."},
	"retry-conflict":  {Tone: "error", Text: "Only a succeeded, failed or cancelled job that no retry has superseded can be retried."},
	"q-not-found":     {Tone: "error", Text: "No job or prompt you can see has this id."},
	"bulk-none":       {Tone: "error", Text: "No job matched; nothing was done."},
	"action-conflict": {Tone: "error", Text: "The state changed meanwhile; nothing was done."},
	"org-paused":      {Tone: "ok", Text: "Paused the organisation: its queued jobs wait until it is resumed; running jobs finish."},
	"org-resumed":     {Tone: "ok", Text: "Resumed the organisation: its queued jobs run again."},
	"org-pause-held":  {Tone: "error", Text: "An admin paused this organisation: only an admin can resume it. Nothing was changed."},
	"model-paused":    {Tone: "ok", Text: "Paused every call to the model, for every organisation, until it is resumed."},
	"model-resumed":   {Tone: "ok", Text: "Resumed the calls to the model: any pause, an operator's or the provider's, has ended, and the jobs that waited for it run."},
}

// dashNoticeOf reads the notice of a redirect; unknown codes show nothing. A bulk action's notice
// is built from its numbers only.
func dashNoticeOf(c *fiber.Ctx) *views.Notice {
	code := c.Query("notice")
	if code == "bulk" {
		action := "cancelled"
		if c.Query("action") == "retry" {
			action = "retried"
		}
		done, _ := strconv.Atoi(c.Query("done"))
		skipped, _ := strconv.Atoi(c.Query("skipped"))
		failed, _ := strconv.Atoi(c.Query("failed"))
		text := strconv.Itoa(max(done, 0)) + " " + dashPlural(done, "job", "jobs") + " " + action + "."
		if skipped > 0 {
			text += " " + strconv.Itoa(skipped) + " skipped: their state changed meanwhile."
		}
		tone := "ok"
		if refused, _ := strconv.Atoi(c.Query("refused")); refused > 0 {
			text += " " + strconv.Itoa(refused) + " refused by admission (budget, quota, submit rate or model list)."
			tone = "error"
		}
		if failed > 0 {
			text += " " + strconv.Itoa(failed) + " failed; see the server log."
			tone = "error"
		}
		return &views.Notice{Tone: tone, Text: text}
	}
	if n, ok := dashNotices[code]; ok {
		return &n
	}
	return nil
}

func dashPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// dashWithNotice appends notice=code to a local path.
func dashWithNotice(path, code string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "notice=" + url.QueryEscape(code)
}
