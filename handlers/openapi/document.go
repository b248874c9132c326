// Package openapi holds the OpenAPI 3.1 document of the HTTP API (/sa-core/v1 and the
// OpenAI-compatible /v1) and serves it as JSON. The document is written by hand in
// openapi.yaml, next to this file; the handler tests check every answer of the API against it
// and that every route of the route table is in it, so it cannot drift from the server.
package openapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"go.yaml.in/yaml/v3"
)

// YAML is the document as written.
//
//go:embed openapi.yaml
var YAML []byte

var (
	once     sync.Once
	jsonDoc  []byte
	etag     string
	parseErr error
)

// JSON returns the document as JSON (keys in the order written) and its ETag, computed once.
func JSON() ([]byte, string, error) {
	once.Do(func() {
		jsonDoc, parseErr = toJSON(YAML)
		if parseErr == nil {
			sum := sha256.Sum256(jsonDoc)
			etag = `"` + hex.EncodeToString(sum[:16]) + `"`
		}
	})
	return jsonDoc, etag, parseErr
}

// toJSON converts a YAML document to JSON, keeping the order of mapping keys so that the JSON
// reads like the YAML.
func toJSON(src []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, fmt.Errorf("parse the OpenAPI document: %w", err)
	}
	var buf bytes.Buffer
	if err := writeNode(&buf, &root); err != nil {
		return nil, fmt.Errorf("convert the OpenAPI document to JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// NodeError is a YAML construct that has no JSON form (an alias, a non-scalar key).
type NodeError struct {
	Line int
	What string
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("line %d: %s has no JSON form", e.Line, e.What)
}

func writeNode(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return &NodeError{Line: n.Line, What: "an empty document"}
		}
		return writeNode(buf, n.Content[0])
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return &NodeError{Line: k.Line, What: "a non-scalar key"}
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			buf.Write(key)
			buf.WriteByte(':')
			if err := writeNode(buf, v); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeNode(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	}
	return &NodeError{Line: n.Line, What: "an alias"}
}

// writeScalar writes a scalar by its resolved YAML tag: numbers, booleans and null as JSON's
// own, everything else (quoted or not) as a string.
func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	var v any
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
		return nil
	case "!!bool", "!!int", "!!float":
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
	default:
		v = n.Value
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	buf.Write(b)
	return nil
}
