package provider

import (
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		wantName string
		wantErr  string
	}{
		{name: "default is sim", env: map[string]string{}, wantName: "sim"},
		{name: "explicit sim with latency", env: map[string]string{ProviderEnv: "sim", SimLatencyEnv: "0-0"}, wantName: "sim"},
		{name: "bad sim latency", env: map[string]string{SimLatencyEnv: "slow"}, wantErr: SimLatencyEnv},
		{name: "openai", env: map[string]string{ProviderEnv: "openai", OpenAIBaseURLEnv: "https://api.openai.com/v1", OpenAIAPIKeyEnv: testAPIKey, OpenAIModelEnv: "gpt-4o"}, wantName: "openai"},
		{name: "openai without model", env: map[string]string{ProviderEnv: "openai", OpenAIBaseURLEnv: "https://api.openai.com/v1", OpenAIAPIKeyEnv: testAPIKey}, wantErr: "model is required"},
		{name: "openai with bad key", env: map[string]string{ProviderEnv: "openai", OpenAIBaseURLEnv: "https://x.example", OpenAIAPIKeyEnv: "a\x00" + testAPIKey, OpenAIModelEnv: "m"}, wantErr: "control characters"},
		{name: "openai with a timeout", env: map[string]string{ProviderEnv: "openai", OpenAIBaseURLEnv: "https://api.openai.com/v1", OpenAIAPIKeyEnv: testAPIKey, OpenAIModelEnv: "gpt-4o", OpenAITimeoutEnv: "90s"}, wantName: "openai"},
		{name: "openai with a bad timeout", env: map[string]string{ProviderEnv: "openai", OpenAIBaseURLEnv: "https://api.openai.com/v1", OpenAIAPIKeyEnv: testAPIKey, OpenAIModelEnv: "gpt-4o", OpenAITimeoutEnv: "soon"}, wantErr: OpenAITimeoutEnv},
		{name: "openai with a negative timeout", env: map[string]string{ProviderEnv: "openai", OpenAIBaseURLEnv: "https://api.openai.com/v1", OpenAIAPIKeyEnv: testAPIKey, OpenAIModelEnv: "gpt-4o", OpenAITimeoutEnv: "-1s"}, wantErr: OpenAITimeoutEnv},
		{name: "unknown provider", env: map[string]string{ProviderEnv: "anthropic"}, wantErr: `"anthropic"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := FromEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testAPIKey) {
					t.Errorf("error leaks the API key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if p.Name() != tt.wantName {
				t.Errorf("Name() = %q, want %q", p.Name(), tt.wantName)
			}
			want := 180 * time.Second
			if v := tt.env[OpenAITimeoutEnv]; v != "" {
				want, _ = time.ParseDuration(v)
			}
			if o, ok := p.(*OpenAI); ok && o.timeout != want {
				t.Errorf("openai timeout %v, want %v", o.timeout, want)
			}
		})
	}
}
