package main

import (
	"fmt"
	"strconv"

	"asterion/handlers"
)

// streamConfig reads the SSE stream limits from the environment.
func (c *cli) streamConfig() (handlers.StreamConfig, error) {
	var cfg handlers.StreamConfig
	if v := c.getenv("ASTERION_MAX_STREAMS_PER_USER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("ASTERION_MAX_STREAMS_PER_USER: want a whole number from 1 to 10000, got %q", v)
		}
		cfg.MaxPerUser = n
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("ASTERION_MAX_STREAMS_PER_USER: %w", err)
	}
	return cfg, nil
}
