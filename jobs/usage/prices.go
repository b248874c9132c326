package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// PricesEnv names the JSON file of the price table.
const PricesEnv = "ASTERION_PRICES"

// Price is what one model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Prices maps a model to its price; a model not listed costs nothing.
type Prices map[string]Price

// ParsePrices reads a price table: {"<model>": {"input_per_mtok": n, "output_per_mtok": n}}.
// Unknown fields, negative or non-finite prices are errors.
func ParsePrices(data []byte) (Prices, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Prices
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("price table: more than one JSON value")
	}
	for model, pr := range p {
		for name, v := range map[string]float64{"input_per_mtok": pr.InputPerMTok, "output_per_mtok": pr.OutputPerMTok} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("price table: %s of model %q is %v, want a price of at least 0", name, model, v)
			}
		}
	}
	return p, nil
}

// LoadPrices reads the price table at path; an empty path is an empty table.
func LoadPrices(path string) (Prices, error) {
	if path == "" {
		return Prices{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PricesEnv, err)
	}
	p, err := ParsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", PricesEnv, path, err)
	}
	return p, nil
}

// Cost is the price of a call to model with the given token counts.
func (p Prices) Cost(model string, input, output int) float64 {
	pr, ok := p[model]
	if !ok {
		return 0
	}
	return (float64(input)*pr.InputPerMTok + float64(output)*pr.OutputPerMTok) / 1e6
}
