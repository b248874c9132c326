package handlers

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"asterion/handlers/openapi"
)

// The handler tests check every answer of an API route against the OpenAPI document: its
// status must be one the operation lists, its Content-Type one of that status's media types,
// its body valid against the schema and its required headers present. The test helpers that
// send requests (send, liveServer.send, openEvents) call checkAnswer; a mismatch fails the test
// that made the request.

// answerChecker validates answers against the document. One validator serves every test; the
// mutex keeps its caches to one goroutine at a time.
type answerChecker struct {
	mu     sync.Mutex
	v      validator.Validator
	routes []routePattern
}

// routePattern is one route of the route table as a regular expression over request paths.
type routePattern struct {
	method string
	re     *regexp.Regexp
}

var documentChecker = sync.OnceValues(func() (*answerChecker, error) {
	raw, _, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, errs[0]
	}
	ch := &answerChecker{v: v}
	for _, r := range New(Deps{}).Routes() {
		if r.Surface == Page {
			continue
		}
		ch.routes = append(ch.routes, routePattern{method: r.Method, re: fiberPathRE(r.Path)})
	}
	return ch, nil
})

var fiberParamRE = regexp.MustCompile(`:[A-Za-z_][A-Za-z0-9_]*`)

// fiberPathRE matches the request paths of a Fiber route path (":id" one segment, "*" the rest).
func fiberPathRE(p string) *regexp.Regexp {
	quoted := regexp.QuoteMeta(p)
	quoted = fiberParamRE.ReplaceAllString(quoted, `[^/]+`)
	quoted = strings.ReplaceAll(quoted, `\*`, `.*`)
	return regexp.MustCompile(`^` + quoted + `$`)
}

// isRoute reports whether method and path name an API route of the route table; an address
// the table does not have (a test of the 404 fallback) is no operation of the document.
func (ch *answerChecker) isRoute(method, path string) bool {
	for _, r := range ch.routes {
		if r.method == method && r.re.MatchString(path) {
			return true
		}
	}
	return false
}

// checkAnswer fails t when resp (with its whole body) answering req is not what the OpenAPI
// document says. Answers of pages and of addresses that are no route are not checked. It
// reports with t.Errorf, so helpers may call it from any goroutine.
func checkAnswer(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	ch, err := documentChecker()
	if err != nil {
		t.Errorf("load the OpenAPI document: %v", err)
		return
	}
	if !ch.isRoute(req.Method, req.URL.Path) {
		return
	}
	copied := *resp
	copied.Body = io.NopCloser(bytes.NewReader(body))
	ch.mu.Lock()
	ok, errs := ch.v.ValidateHttpResponse(req, &copied)
	ch.mu.Unlock()
	if ok {
		return
	}
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n  " + e.Message)
		if e.Reason != "" {
			b.WriteString(": " + e.Reason)
		}
		for _, se := range e.SchemaValidationErrors {
			b.WriteString("\n    " + se.Reason + " at " + se.FieldPath + " (" + se.KeywordLocation + ")")
		}
	}
	t.Errorf("%s %s answered %d (%s) against the OpenAPI document:%s\nbody: %.600s", req.Method, req.URL.Path,
		resp.StatusCode, resp.Header.Get("Content-Type"), b.String(), body)
}

// checkStreamHead checks the status, headers and media type of a streamed answer whose body is
// still being read (the document gives a stream no schema to check it against).
func checkStreamHead(t testing.TB, req *http.Request, resp *http.Response) {
	t.Helper()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		checkAnswer(t, req, resp, nil)
	}
}
