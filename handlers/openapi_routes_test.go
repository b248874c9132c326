package handlers

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"asterion/handlers/openapi"
)

// documentOperations reads the "METHOD /path" of every operation of the OpenAPI document.
func documentOperations(t *testing.T) map[string]bool {
	t.Helper()
	raw, _, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				ops[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	return ops
}

// wildcardNames names what the rest of the path of a wildcard route is, as the document's path
// parameter: a template stands for one segment, so the document cannot say "the rest".
var wildcardNames = map[string]string{"/v1/models/*": "model"}

// openapiKey is a route of the table as the document names it: Fiber's ":id" is "{id}", and a
// wildcard is the parameter wildcardNames names ("*" itself when it names none, which no
// document path matches).
func openapiKey(r Route) string {
	p := fiberParamRE.ReplaceAllStringFunc(r.Path, func(p string) string { return "{" + p[1:] + "}" })
	if name, ok := wildcardNames[r.Path]; ok {
		p = strings.Replace(p, "*", "{"+name+"}", 1)
	}
	return r.Method + " " + p
}

// TestOpenAPIDocumentsRoutes holds the document and the route table together: every route of
// the API and of the OpenAI-compatible front door (health, readiness and /metrics too, which
// are API routes; the HTML pages are not) is an operation of the document, and every operation
// of the document is a route.
func TestOpenAPIDocumentsRoutes(t *testing.T) {
	t.Parallel()
	ops := documentOperations(t)
	routes := map[string]bool{}
	var api []Route
	for _, r := range New(Deps{}).Routes() {
		routes[openapiKey(r)] = true
		if r.Surface != Page {
			api = append(api, r)
		}
	}
	if len(api) < 20 {
		t.Fatalf("only %d API routes in the route table; the test reads the wrong table", len(api))
	}

	t.Run("every API route is documented", func(t *testing.T) {
		for _, r := range api {
			if k := openapiKey(r); !ops[k] {
				t.Errorf("route %s (%s %s) is not in handlers/openapi/openapi.yaml", k, r.Method, r.Path)
			}
		}
	})

	t.Run("every documented operation is a route", func(t *testing.T) {
		var missing []string
		for k := range ops {
			if !routes[k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		for _, k := range missing {
			t.Errorf("the document describes %s, which is no route of handlers/routes.go", k)
		}
	})
}

// TestOpenAPIServed reads the document where it is served: public, JSON, the same bytes as the
// package's, with an ETag that a conditional GET turns into a 304 without a body.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	want, etag, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	resp, body := e.do(t, get(openapiPath))
	if resp.StatusCode != http.StatusOK || body != string(want) {
		t.Fatalf("GET %s: %d, %d bytes; want 200 with the document (%d bytes)", openapiPath, resp.StatusCode, len(body), len(want))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if got := resp.Header.Get("ETag"); got != etag {
		t.Errorf("ETag %q, want %q", got, etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		req := get(openapiPath)
		req.Header.Set("If-None-Match", inm)
		resp, body = e.do(t, req)
		if resp.StatusCode != http.StatusNotModified || body != "" {
			t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and no body", inm, resp.StatusCode, len(body))
		}
	}
	req := get(openapiPath)
	req.Header.Set("If-None-Match", `"stale"`)
	if resp, body = e.do(t, req); resp.StatusCode != http.StatusOK || body != string(want) {
		t.Errorf("If-None-Match of another version: %d, want 200 with the document", resp.StatusCode)
	}
}
