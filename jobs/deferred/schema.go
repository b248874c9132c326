package deferred

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// ErrInvalidDocument is wrapped by every error about a document that breaks
// its JSON Schema or the contract rules a schema cannot express.
var ErrInvalidDocument = errors.New("deferred: invalid document")

// The schema names, as written in each document's "schema" field.
const (
	HandleSchema = "deferred-operation.v1"
	StatusSchema = "deferred-operation-status.v1"
)

// Schemas holds the JSON Schemas (draft 2020-12) of both documents under
// schema/<name>.json, with positive and negative examples under
// schema/examples/{valid,invalid}/<name>/.
//
//go:embed schema
var Schemas embed.FS

// compiled are the two schemas, compiled once at package initialization, and
// sources their decoded documents by $id, read to explain a failed "not".
var compiled, sources = mustCompileSchemas()

// mustCompileSchemas compiles both embedded schemas with format assertions
// on; an embedded schema that does not compile is a build defect, so it
// panics.
func mustCompileSchemas() (map[string]*jsonschema.Schema, map[string]any) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	urls := map[string]string{}
	docs := map[string]any{}
	for _, name := range []string{HandleSchema, StatusSchema} {
		raw, err := Schemas.ReadFile("schema/" + name + ".json")
		if err != nil {
			panic(fmt.Sprintf("deferred: embedded schema %s: %v", name, err))
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			panic(fmt.Sprintf("deferred: embedded schema %s: %v", name, err))
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			panic(fmt.Sprintf("deferred: embedded schema %s has no $id", name))
		}
		if err := c.AddResource(id, doc); err != nil {
			panic(fmt.Sprintf("deferred: embedded schema %s: %v", name, err))
		}
		urls[name] = id
		docs[id] = doc
	}
	out := map[string]*jsonschema.Schema{}
	for name, id := range urls {
		s, err := c.Compile(id)
		if err != nil {
			panic(fmt.Sprintf("deferred: compile schema %s: %v", name, err))
		}
		out[name] = s
	}
	return out, docs
}

// DocumentError is the error of a document that breaks its schema. It wraps
// ErrInvalidDocument and, for a schema violation, the
// *jsonschema.ValidationError with every detail; its message is one line.
type DocumentError struct {
	// Schema is the name of the schema the document was checked against.
	Schema string
	// Reason is a one-line description of the first violations.
	Reason string
	// Err is the underlying error: a *jsonschema.ValidationError, a JSON
	// syntax error, or a contract rule a schema cannot express.
	Err error
}

// Error returns one line: the schema name and the reason.
func (e *DocumentError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrInvalidDocument.Error(), e.Schema, e.Reason)
}

// Unwrap returns ErrInvalidDocument and the underlying error.
func (e *DocumentError) Unwrap() []error { return []error{ErrInvalidDocument, e.Err} }

// ValidateHandle checks doc against deferred-operation.v1 with format
// assertions on, and returns nil or a *DocumentError wrapping
// ErrInvalidDocument.
func ValidateHandle(doc []byte) error { return validate(HandleSchema, doc) }

// ValidateStatus checks doc against deferred-operation-status.v1 with format
// assertions on, and returns nil or a *DocumentError wrapping
// ErrInvalidDocument.
func ValidateStatus(doc []byte) error { return validate(StatusSchema, doc) }

// validate parses doc as exactly one JSON value and checks it against the
// named schema.
func validate(name string, doc []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &DocumentError{Schema: name, Reason: "not JSON: " + oneLine(err.Error()), Err: err}
	}
	if err := compiled[name].Validate(inst); err != nil {
		return &DocumentError{Schema: name, Reason: describe(err), Err: err}
	}
	return nil
}

// maxReasons bounds how many violations a one-line reason names.
const maxReasons = 3

// describe turns a schema error into one line naming the innermost
// violations with their instance locations.
func describe(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return oneLine(err.Error())
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := oneLine(e.Error())
			if _, ok := e.ErrorKind.(*kind.Not); ok {
				loc := ""
				for _, tok := range e.InstanceLocation {
					loc += "/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
				}
				msg = fmt.Sprintf("at '%s': breaks %q", loc, explainNot(e.SchemaURL))
			}
			leaves = append(leaves, msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) == 0 {
		return oneLine(ve.Error())
	}
	more := ""
	if len(leaves) > maxReasons {
		more = fmt.Sprintf(" (and %d more)", len(leaves)-maxReasons)
		leaves = leaves[:maxReasons]
	}
	return strings.Join(leaves, "; ") + more
}

// explainNot returns the description of the innermost schema object, below
// the root, that encloses a failed "not" at schemaURL (an absolute URL whose
// fragment is a JSON pointer), or the fragment itself when none has one.
func explainNot(schemaURL string) string {
	base, frag, _ := strings.Cut(schemaURL, "#")
	var toks []string
	if frag = strings.TrimPrefix(frag, "/"); frag != "" {
		toks = strings.Split(frag, "/")
	}
	for n := len(toks); n > 0; n-- {
		var v any = sources[base]
		for _, tok := range toks[:n] {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch node := v.(type) {
			case map[string]any:
				v = node[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(node) {
					v = nil
				} else {
					v = node[i]
				}
			default:
				v = nil
			}
		}
		if obj, ok := v.(map[string]any); ok {
			if d, ok := obj["description"].(string); ok && d != "" {
				return d
			}
		}
	}
	return "not at #/" + frag
}

// oneLine collapses every run of whitespace, newlines included, into one
// space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
