package views

import "strings"

// withDefaults fills the title and the active navigation item of p when they are empty.
func withDefaults(p Page, title, nav string) Page {
	if p.Title == "" {
		p.Title = title
	}
	if p.Nav == "" {
		p.Nav = nav
	}
	return p
}

// withNav sets the active navigation item of p: a page knows which item it is.
func withNav(p Page, nav string) Page {
	p.Nav = nav
	return p
}

// errorTitle returns title, or a standard title for status when title is empty.
func errorTitle(status int, title string) string {
	if title != "" {
		return title
	}
	switch status {
	case 401:
		return "Please sign in"
	case 403:
		return "You do not have access to this page"
	case 404:
		return "Page not found"
	default:
		return "Something went wrong"
	}
}

// tone is the pair of classes for a status pill and its dot. The class strings are complete
// literals so that Tailwind finds them when it scans this file.
type tone struct{ badge, dot string }

var (
	toneAmber   = tone{"bg-amber-50 text-amber-800 ring-amber-600/20 dark:bg-amber-400/10 dark:text-amber-300 dark:ring-amber-400/20", "bg-amber-500"}
	toneSky     = tone{"bg-sky-50 text-sky-800 ring-sky-600/20 dark:bg-sky-400/10 dark:text-sky-300 dark:ring-sky-400/20", "bg-sky-500"}
	toneEmerald = tone{"bg-emerald-50 text-emerald-800 ring-emerald-600/20 dark:bg-emerald-400/10 dark:text-emerald-300 dark:ring-emerald-400/20", "bg-emerald-500"}
	toneRose    = tone{"bg-rose-50 text-rose-800 ring-rose-600/20 dark:bg-rose-400/10 dark:text-rose-300 dark:ring-rose-400/20", "bg-rose-500"}
	toneZinc    = tone{"bg-zinc-100 text-zinc-700 ring-zinc-500/20 dark:bg-zinc-400/10 dark:text-zinc-300 dark:ring-zinc-400/20", "bg-zinc-400"}
	toneSlate   = tone{"bg-slate-100 text-slate-700 ring-slate-500/20 dark:bg-slate-400/10 dark:text-slate-300 dark:ring-slate-400/20", "bg-slate-400"}
)

// statusTone maps job states and deferred-operation statuses to colours.
func statusTone(status string) tone {
	switch status {
	case "pending", "queued":
		return toneAmber
	case "running":
		return toneSky
	case "completed", "succeeded":
		return toneEmerald
	case "failed", "timed-out", "expired":
		return toneRose
	case "cancelled", "superseded":
		return toneZinc
	default:
		return toneSlate
	}
}

// statusLabel is the text of a status pill: the status with its dashes as spaces.
func statusLabel(status string) string {
	if status == "" {
		return "unknown"
	}
	return strings.ReplaceAll(status, "-", " ")
}
