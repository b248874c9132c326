package deferred

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// exampleFiles returns the example files of one schema and verdict, read from
// the embedded tree (which is the schema/ directory beside this file).
func exampleFiles(t *testing.T, verdict, schema string) map[string][]byte {
	t.Helper()
	dir := path.Join("schema/examples", verdict, schema)
	entries, err := fs.ReadDir(Schemas, dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := fs.ReadFile(Schemas, path.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

var validators = map[string]func([]byte) error{
	HandleSchema: ValidateHandle,
	StatusSchema: ValidateStatus,
}

func TestExamples(t *testing.T) {
	for schema, validate := range validators {
		valid := exampleFiles(t, "valid", schema)
		invalid := exampleFiles(t, "invalid", schema)
		if len(valid) < 4 || len(invalid) < 8 {
			t.Errorf("%s: %d valid and %d invalid examples, want at least 4 and 8", schema, len(valid), len(invalid))
		}
		for name, doc := range valid {
			if err := validate(doc); err != nil {
				t.Errorf("%s valid/%s: %v", schema, name, err)
			}
		}
		for name, doc := range invalid {
			err := validate(doc)
			if err == nil {
				t.Errorf("%s invalid/%s: accepted", schema, name)
				continue
			}
			if !errors.Is(err, ErrInvalidDocument) {
				t.Errorf("%s invalid/%s: error %v does not wrap ErrInvalidDocument", schema, name, err)
			}
			var ve *jsonschema.ValidationError
			if !errors.As(err, &ve) {
				t.Errorf("%s invalid/%s: error %v does not carry the schema error", schema, name, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("%s invalid/%s: message is not one line: %q", schema, name, err)
			}
			t.Logf("%s invalid/%s: %v", schema, name, err)
		}
	}
}

// TestExamplesParse checks that the Go types agree with the schema on the
// examples: every valid example parses, every invalid one is refused.
func TestExamplesParse(t *testing.T) {
	for name, doc := range exampleFiles(t, "valid", HandleSchema) {
		if _, err := ParseHandle(doc); err != nil {
			t.Errorf("ParseHandle(valid/%s) = %v", name, err)
		}
	}
	for name, doc := range exampleFiles(t, "invalid", HandleSchema) {
		if _, err := ParseHandle(doc); !errors.Is(err, ErrInvalidDocument) {
			t.Errorf("ParseHandle(invalid/%s) = %v, want ErrInvalidDocument", name, err)
		}
	}
	for name, doc := range exampleFiles(t, "valid", StatusSchema) {
		if _, err := ParseStatusDoc(doc); err != nil {
			t.Errorf("ParseStatusDoc(valid/%s) = %v", name, err)
		}
	}
	for name, doc := range exampleFiles(t, "invalid", StatusSchema) {
		if _, err := ParseStatusDoc(doc); !errors.Is(err, ErrInvalidDocument) {
			t.Errorf("ParseStatusDoc(invalid/%s) = %v, want ErrInvalidDocument", name, err)
		}
	}
}

func TestValidateNotJSON(t *testing.T) {
	for _, doc := range []string{"", "{", "nul", `{"a":1} {"b":2}`, "\xff"} {
		for schema, validate := range validators {
			err := validate([]byte(doc))
			if !errors.Is(err, ErrInvalidDocument) {
				t.Errorf("%s: validate(%q) = %v, want ErrInvalidDocument", schema, doc, err)
			}
			var de *DocumentError
			if !errors.As(err, &de) || de.Schema != schema {
				t.Errorf("%s: validate(%q) = %v, want a *DocumentError for the schema", schema, doc, err)
			}
		}
	}
	for _, doc := range []string{"null", "[]", "42", `"x"`} {
		if err := ValidateHandle([]byte(doc)); !errors.Is(err, ErrInvalidDocument) {
			t.Errorf("ValidateHandle(%q) = %v", doc, err)
		}
	}
}

func TestDescribeIsBounded(t *testing.T) {
	// Everything wrong at once still gives one bounded line.
	err := ValidateStatus([]byte(`{"schema":1,"operation_id":2,"kind":3,"status":4,"terminal":5,"updated_at":6,"expires_at":7,"x":8,"y":9}`))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, "more)") {
		t.Errorf("message %q is not one bounded line", msg)
	}
}
