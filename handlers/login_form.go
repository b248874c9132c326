package handlers

import (
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"

	"asterion/identity"
)

// loginForm is what a sign-in posts.
type loginForm struct {
	CSRF     string
	Username string
	Password string
	Next     string
}

// Bounds of the sign-in form: a user name has at most 100 characters, a token 64; anything far
// beyond is not a person signing in.
const (
	maxLoginBody     = 8 << 10
	maxLoginUsername = 200
	maxLoginField    = 2048
)

// errLoginForm is a sign-in body that cannot be read as the form.
var errLoginForm = errors.New("unreadable sign-in form")

// parseLoginForm reads the sign-in form from the request body only (never the query string),
// as application/x-www-form-urlencoded. A field given twice, a bad escape or an oversized field
// is an error: the form the page sends has each field once.
func parseLoginForm(contentType string, body []byte) (loginForm, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return loginForm{}, fmt.Errorf("%w: content type %q", errLoginForm, contentType)
	}
	if len(body) > maxLoginBody {
		return loginForm{}, fmt.Errorf("%w: body of %d bytes", errLoginForm, len(body))
	}
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return loginForm{}, fmt.Errorf("%w: %v", errLoginForm, err)
	}
	var f loginForm
	for key, limit := range map[string]int{csrfField: maxLoginField, "username": maxLoginUsername,
		"password": identity.MaxPasswordLen, "next": maxLoginField} {
		vs := vals[key]
		if len(vs) > 1 {
			return loginForm{}, fmt.Errorf("%w: field %s given %d times", errLoginForm, key, len(vs))
		}
		if len(vs) == 1 && len(vs[0]) > limit {
			return loginForm{}, fmt.Errorf("%w: field %s longer than %d bytes", errLoginForm, key, limit)
		}
	}
	f.CSRF = vals.Get(csrfField)
	f.Username = strings.TrimSpace(vals.Get("username"))
	f.Password = vals.Get("password")
	f.Next = vals.Get("next")
	return f, nil
}
