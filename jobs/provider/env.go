package provider

import (
	"fmt"
	"strings"
	"time"
)

// The environment variables FromEnv reads (docs/configuration.md, "Provider").
const (
	ProviderEnv      = "ASTERION_PROVIDER"
	OpenAIBaseURLEnv = "ASTERION_OPENAI_BASE_URL"
	OpenAIAPIKeyEnv  = "ASTERION_OPENAI_API_KEY"
	OpenAIModelEnv   = "ASTERION_OPENAI_MODEL"
	// OpenAITimeoutEnv overrides the adapter timeout (a Go duration, e.g. "90s").
	OpenAITimeoutEnv = "ASTERION_OPENAI_TIMEOUT"
)

// FromEnv returns the provider the environment selects, reading variables
// through getenv (os.Getenv in production). ASTERION_PROVIDER empty or
// "sim" gives the simulated provider configured by SimConfigFromEnv;
// "openai" gives an OpenAI-compatible provider configured from
// ASTERION_OPENAI_BASE_URL, ASTERION_OPENAI_API_KEY and
// ASTERION_OPENAI_MODEL with the 180 s timeout unless ASTERION_OPENAI_TIMEOUT
// sets another. Any other value is an error. No error contains the API key.
func FromEnv(getenv func(string) string) (Provider, error) {
	switch name := strings.TrimSpace(getenv(ProviderEnv)); name {
	case "", SimName:
		cfg, err := SimConfigFromEnv(getenv)
		if err != nil {
			return nil, fmt.Errorf("configuring sim provider: %w", err)
		}
		return NewSim(cfg), nil
	case OpenAIName:
		var timeout time.Duration
		if v := strings.TrimSpace(getenv(OpenAITimeoutEnv)); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s=%q: want a positive duration such as 90s", OpenAITimeoutEnv, v)
			}
			timeout = d
		}
		p, err := NewOpenAI(OpenAIConfig{
			BaseURL: getenv(OpenAIBaseURLEnv),
			APIKey:  strings.TrimSpace(getenv(OpenAIAPIKeyEnv)),
			Model:   getenv(OpenAIModelEnv),
			Timeout: timeout,
		})
		if err != nil {
			return nil, fmt.Errorf("configuring openai provider from %s, %s, %s: %w", OpenAIBaseURLEnv, OpenAIAPIKeyEnv, OpenAIModelEnv, err)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("%s=%q: want %q or %q", ProviderEnv, name, SimName, OpenAIName)
	}
}
