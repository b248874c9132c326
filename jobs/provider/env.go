package provider

import (
	"fmt"
	"strings"
)

// The environment variables FromEnv reads (see the wire contract, "The
// built-in provider").
const (
	ProviderEnv      = "ASTERION_PROVIDER"
	OpenAIBaseURLEnv = "ASTERION_OPENAI_BASE_URL"
	OpenAIAPIKeyEnv  = "ASTERION_OPENAI_API_KEY"
	OpenAIModelEnv   = "ASTERION_OPENAI_MODEL"
)

// FromEnv returns the provider the environment selects, reading variables
// through getenv (os.Getenv in production). ASTERION_PROVIDER empty or
// "sim" gives the simulated provider configured by SimConfigFromEnv;
// "openai" gives an OpenAI-compatible provider configured from
// ASTERION_OPENAI_BASE_URL, ASTERION_OPENAI_API_KEY and
// ASTERION_OPENAI_MODEL with the default 180 s timeout. Any other value is
// an error. No error contains the API key.
func FromEnv(getenv func(string) string) (Provider, error) {
	switch name := strings.TrimSpace(getenv(ProviderEnv)); name {
	case "", SimName:
		cfg, err := SimConfigFromEnv(getenv)
		if err != nil {
			return nil, fmt.Errorf("configuring sim provider: %w", err)
		}
		return NewSim(cfg), nil
	case OpenAIName:
		p, err := NewOpenAI(OpenAIConfig{
			BaseURL: getenv(OpenAIBaseURLEnv),
			APIKey:  strings.TrimSpace(getenv(OpenAIAPIKeyEnv)),
			Model:   getenv(OpenAIModelEnv),
		})
		if err != nil {
			return nil, fmt.Errorf("configuring openai provider from %s, %s, %s: %w", OpenAIBaseURLEnv, OpenAIAPIKeyEnv, OpenAIModelEnv, err)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("%s=%q: want %q or %q", ProviderEnv, name, SimName, OpenAIName)
	}
}
