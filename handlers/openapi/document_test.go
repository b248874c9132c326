package openapi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestDocumentIsValidOpenAPI31 loads the served JSON with libopenapi and validates it against
// the OpenAPI 3.1 specification's own schema.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	raw, tag, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) || len(tag) < 10 {
		t.Errorf("ETag %q is not a quoted strong validator", tag)
	}
	var head struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Fatalf("the served document is not JSON: %v", err)
	}
	if !strings.HasPrefix(head.OpenAPI, "3.1.") {
		t.Fatalf("openapi %q, want 3.1.x", head.OpenAPI)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatalf("libopenapi: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("build validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s at %s", se.Reason, se.FieldPath+" "+se.KeywordLocation)
			}
		}
	}
}

// TestDocumentRejectsWhatIsNotJSON checks the converter refuses YAML that has no JSON form
// instead of serving something else.
func TestDocumentRejectsWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"alias":        "a: &x 1\nb: *x\n",
		"complex key":  "? [a, b]\n: 1\n",
		"not yaml":     "a: [1, 2\n",
		"empty string": "",
	} {
		if out, err := toJSON([]byte(src)); err == nil {
			t.Errorf("%s: converted to %s, want an error", name, out)
		}
	}
	out, err := toJSON([]byte("a: 1\nb: '1'\nc: true\nd: null\ne: 1.5\nf: [x, 'y']\nz: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":1,"b":"1","c":true,"d":null,"e":1.5,"f":["x","y"],"z":{}}`; string(out) != want {
		t.Errorf("converted to %s, want %s", out, want)
	}
}

// TestDeferredSchemasAgree validates the project's examples of the two deferred-operation
// documents against the document's components: every valid example passes and every invalid
// one fails, so the document says what the project's JSON Schemas say.
func TestDeferredSchemasAgree(t *testing.T) {
	t.Parallel()
	raw, _, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const base = "https://asterion.invalid/openapi.json"
	if err := c.AddResource(base, doc); err != nil {
		t.Fatal(err)
	}
	examples := filepath.Join("..", "..", "jobs", "deferred", "schema", "examples")
	for dir, component := range map[string]string{
		"deferred-operation.v1":        "DeferredOperation",
		"deferred-operation-status.v1": "DeferredOperationStatus",
	} {
		sch, err := c.Compile(base + "#/components/schemas/" + component)
		if err != nil {
			t.Fatalf("compile %s: %v", component, err)
		}
		for _, valid := range []bool{true, false} {
			kind := map[bool]string{true: "valid", false: "invalid"}[valid]
			files, err := filepath.Glob(filepath.Join(examples, kind, dir, "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no %s examples of %s (%v)", kind, dir, err)
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				err = sch.Validate(v)
				if valid && err != nil {
					t.Errorf("%s: the document's %s refuses a valid example: %v", f, component, err)
				}
				if !valid && err == nil {
					t.Errorf("%s: the document's %s accepts an invalid example", f, component)
				}
			}
		}
	}
}
