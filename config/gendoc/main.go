// Command gendoc writes docs/configuration.md from the table of package config: `make docs`
// (or `go generate ./config`) runs it.
package main

import (
	"fmt"
	"os"

	"asterion/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendoc PATH")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(config.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
