package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// usageError is a mistake in how the command was called: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode maps an error to the contract's exit codes: 2 for usage, 1 for everything else.
func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// oneLine keeps an error to one line on stderr.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}

// env reads the process environment; tests pass their own.
type env func(string) string

// cli carries what every subcommand needs.
type cli struct {
	getenv env
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

const usage = `usage: asterion <command> [flags]

commands:
  serve [--addr=127.0.0.1:8080] [--workers=N] [--no-worker] [--local-database]
                                                                migrate, then serve HTTP and run workers
  migrate [up|down|status] [--all]                              apply, roll back or show migrations
  org create NAME                                               create an org
  org set-webhook NAME (--url URL [--secret-stdin] | --clear)   deliver an org's responses to a webhook
  org set-budget NAME (--tokens N --period day|month | --clear) cap an org's tokens per UTC day or month
  org set-weight NAME N                                         an org's weight in the fair share of workers
  org pause NAME | org resume NAME                              hold an org's queued jobs, or let them run again
  model pause MODEL | model resume MODEL                        hold every call to a model, or let them go again
  user create --org ORG --name NAME --role ROLE [--password-stdin]
  user disable NAME | user enable NAME                          stop or restore a user (disable ends its sessions)
  user set-password NAME --password-stdin                       replace a password (ends the user's sessions)
  token create --user NAME [--expires 30d]                      print a new API token
  token list --user NAME                                        a user's tokens: id, prefix, created, last used, expiry
  token revoke ID                                               make a token unusable at once
  session revoke --user NAME                                    sign a user out of every browser
  run-worker [--once] [--batch-size=N] [--priority-ceiling=N]   a worker process only
  prompt run TEXT                                               run one prompt in-process and print the answer
  prompt submit [--user N] [--priority N] [--at TIME] TEXT      queue a prompt (--at RFC 3339 or +10m: run it then)
  list-jobs [--state=] [--org=] [--since=] [--limit=N]          list jobs, newest first
  job-details ID | cancel-job ID | retry-job ID                 inspect or act on one job
  queue-metrics [--window=1h]                                   counts by state, per-org latency and errors
  archive-old-jobs --before=DATE                                move old terminal jobs to the archive table
  reclaim-stuck-jobs                                            reclaim jobs whose heartbeat stopped, once
  version                                                       print the version
  help env                                                      every environment variable, its default and meaning
Every command takes --database-url (default $DATABASE_URL) and --json.`

// run is the whole program: it parses args, runs one subcommand and returns its error.
func run(ctx context.Context, args []string, getenv env, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &cli{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return c.serve(ctx, rest)
	case "migrate":
		return c.migrate(ctx, rest)
	case "org":
		if len(rest) > 0 && rest[0] == "set-webhook" {
			return c.orgSetWebhook(ctx, rest[1:])
		}
		if len(rest) > 0 && rest[0] == "set-budget" {
			return c.orgSetBudget(ctx, rest[1:])
		}
		if len(rest) > 0 && rest[0] == "set-weight" {
			return c.orgSetWeight(ctx, rest[1:])
		}
		if len(rest) > 0 && (rest[0] == "pause" || rest[0] == "resume") {
			return c.orgPause(ctx, rest[0], rest[1:])
		}
		if len(rest) == 0 || rest[0] != "create" {
			return usagef("usage: asterion org create NAME")
		}
		return c.orgCreate(ctx, rest[1:])
	case "model":
		if len(rest) == 0 || (rest[0] != "pause" && rest[0] != "resume") {
			return usagef(modelPauseUsage)
		}
		return c.modelPause(ctx, rest[0], rest[1:])
	case "user":
		switch {
		case len(rest) > 0 && rest[0] == "create":
			return c.userCreate(ctx, rest[1:])
		case len(rest) > 0 && (rest[0] == "disable" || rest[0] == "enable" || rest[0] == "set-password"):
			return c.userCommand(ctx, rest[0], rest[1:])
		}
		return usagef("usage: asterion user create|disable|enable|set-password … (run asterion help)")
	case "token":
		switch {
		case len(rest) > 0 && rest[0] == "create":
			return c.tokenCreate(ctx, rest[1:])
		case len(rest) > 0 && rest[0] == "list":
			return c.tokenList(ctx, rest[1:])
		case len(rest) > 0 && rest[0] == "revoke":
			return c.tokenRevoke(ctx, rest[1:])
		}
		return usagef("usage: asterion token create|list|revoke … (run asterion help)")
	case "session":
		if len(rest) == 0 || rest[0] != "revoke" {
			return usagef("usage: asterion session revoke --user NAME")
		}
		return c.sessionRevoke(ctx, rest[1:])
	case "run-worker":
		return c.runWorker(ctx, rest)
	case "prompt":
		switch {
		case len(rest) > 0 && rest[0] == "run":
			return c.promptRun(ctx, rest[1:])
		case len(rest) > 0 && rest[0] == "submit":
			return c.promptSubmit(ctx, rest[1:])
		}
		return usagef("usage: asterion prompt run|submit TEXT (run asterion help)")
	case "list-jobs":
		return c.listJobs(ctx, rest)
	case "job-details":
		return c.jobDetails(ctx, rest)
	case "cancel-job":
		return c.cancelJob(ctx, rest)
	case "retry-job":
		return c.retryJob(ctx, rest)
	case "queue-metrics":
		return c.queueMetrics(ctx, rest)
	case "archive-old-jobs":
		return c.archiveOldJobs(ctx, rest)
	case "reclaim-stuck-jobs":
		return c.reclaimStuckJobs(ctx, rest)
	case "version", "--version":
		fmt.Fprintln(stdout, "asterion "+version)
		return nil
	case "help", "-h", "--help":
		if len(rest) > 0 && rest[0] == "env" {
			return helpEnv(stdout, rest[1:])
		}
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usagef("unknown command %q (run asterion help)", cmd)
}

// newFlags returns a flag set that reports mistakes as usage errors instead of exiting.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses and turns flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usagef("usage of %s: see asterion help", fs.Name())
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}
