package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"asterion/identity"
)

// TestMissionBrowserRunAt: in a browser whose zone is five and a half hours east of UTC, the
// compose bar's run-at time is that zone's wall clock: the prompt is scheduled for the instant
// it names, and its drop shows "scheduled for" with the time as the reader wrote it.
func TestMissionBrowserRunAt(t *testing.T) {
	holdBrowserSlot(t)
	app := startAppServer(t, appServerConfig{HoldWorkers: true})
	u := app.user(t, "acme", "ravi", identity.RoleMember)
	br := newChrome(t)
	ctx := br.browser
	chromeDo(t, ctx, "set the time zone", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
		return err
	}))
	chromeLogin(t, ctx, app.Base, u)
	openMission(t, ctx, app.Base)

	kolkata := time.FixedZone("IST", 5*3600+1800)
	local := time.Now().In(kolkata).Add(3 * time.Hour).Truncate(time.Minute)
	value := local.Format("2006-01-02T15:04")
	// Typing into a datetime-local differs between locales; set it and fire the event a user's
	// edit fires.
	chromeEval[bool](t, ctx, `(() => { const el = document.getElementById("compose-run-at"); el.value = `+jsString(value)+`;
		el.dispatchEvent(new Event("change", { bubbles: true })); return true; })()`)
	if got := chromeEval[string](t, ctx, `document.querySelector("#compose input[name=run_at_offset]").value`); got != "-330" {
		t.Errorf("run_at_offset %q, want -330 (five and a half hours east)", got)
	}
	id := submitFromPage(t, ctx, "at tea time")
	// The server writes the time in UTC; app.js puts it in the reader's zone once htmx settles
	// the drop.
	clock := chromeWait[string](t, ctx, "the scheduled drop in local time", `(() => { const el = document.querySelector(`+
		jsString(dropSelector(id)+" [data-scheduled] time[data-clock]")+`);
		return el && !el.textContent.endsWith("UTC") ? el.textContent : ""; })()`, 10*time.Second)
	if want := local.Format("15:04"); clock != want {
		t.Errorf("the drop shows %q, want the reader's %s", clock, want)
	}
	var at time.Time
	if err := app.DB.Bun.QueryRowContext(context.Background(), "SELECT scheduled_for FROM sa_job WHERE prompt_id = ?", id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if !at.Equal(local) {
		t.Errorf("scheduled_for %v, want %v (%s in Kolkata)", at.UTC(), local.UTC(), value)
	}
}
