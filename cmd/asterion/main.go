// Command asterion is the one binary of Asterion: the server, the workers and the operator
// command line (docs/cli.md lists every command).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "asterion: "+oneLine(err))
		os.Exit(exitCode(err))
	}
}
