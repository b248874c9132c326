package main

import (
	"fmt"
	"io"

	"asterion/config"
)

// helpEnv prints every environment variable of the table in package config, the same list
// docs/configuration.md is generated from.
func helpEnv(stdout io.Writer, args []string) error {
	if len(args) > 0 {
		return usagef("usage: asterion help env")
	}
	_, err := fmt.Fprint(stdout, config.Text())
	return err
}
