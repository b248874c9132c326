package main

import (
	"github.com/prometheus/client_golang/prometheus"

	jobusage "asterion/jobs/usage"
)

// usageCollector exposes the tokens and cost this process recorded, per model:
// asterion_tokens_total{direction,model} and asterion_cost_usd_total{model}.
type usageCollector struct {
	meter        *jobusage.Meter
	tokens, cost *prometheus.Desc
}

func newUsageCollector(m *jobusage.Meter) *usageCollector {
	return &usageCollector{meter: m,
		tokens: prometheus.NewDesc("asterion_tokens_total", "Tokens of the provider calls this process recorded.",
			[]string{"direction", "model"}, nil),
		cost: prometheus.NewDesc("asterion_cost_usd_total", "Cost in US dollars of the provider calls this process recorded, from ASTERION_PRICES.",
			[]string{"model"}, nil),
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tokens
	ch <- c.cost
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	for model, t := range c.meter.Recorded() {
		ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.CounterValue, float64(t.InputTokens), "input", model)
		ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.CounterValue, float64(t.OutputTokens), "output", model)
		ch <- prometheus.MustNewConstMetric(c.cost, prometheus.CounterValue, t.CostUSD, model)
	}
}
