package db

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrBadURL reports a DATABASE_URL that cannot be used; the message says what is wrong.
var ErrBadURL = errors.New("invalid database URL")

// URL is a validated PostgreSQL connection URL.
type URL struct {
	raw      *url.URL
	Host     string
	Port     string
	Database string
	User     string
}

// ParseURL validates a postgres:// URL without connecting, so that a malformed setting is one
// clear error at start instead of a panic deep inside a driver.
func ParseURL(s string) (URL, error) {
	if strings.TrimSpace(s) == "" {
		return URL{}, fmt.Errorf("%w: empty (set DATABASE_URL or --database-url)", ErrBadURL)
	}
	u, err := url.Parse(s)
	if err != nil {
		return URL{}, fmt.Errorf("%w: %s", ErrBadURL, redactErr(err, s))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return URL{}, fmt.Errorf("%w: scheme must be postgres:// or postgresql://, got %q", ErrBadURL, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if h := u.Query().Get("host"); h != "" {
		host = h
	}
	if host == "" {
		return URL{}, fmt.Errorf("%w: no host", ErrBadURL)
	}
	if port == "" {
		port = "5432"
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return URL{}, fmt.Errorf("%w: bad port %q", ErrBadURL, p)
		}
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	if dbname == "" || strings.Contains(dbname, "/") {
		return URL{}, fmt.Errorf("%w: no database name in the path", ErrBadURL)
	}
	user := ""
	if u.User != nil {
		user = u.User.Username()
	}
	if user == "" {
		return URL{}, fmt.Errorf("%w: no user", ErrBadURL)
	}
	switch mode := u.Query().Get("sslmode"); mode {
	case "", "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
	default:
		return URL{}, fmt.Errorf("%w: unknown sslmode %q", ErrBadURL, mode)
	}
	return URL{raw: u, Host: host, Port: port, Database: dbname, User: user}, nil
}

// String returns the URL as given.
func (u URL) String() string { return u.raw.String() }

// Redacted returns the URL with any password hidden, for logs and errors.
func (u URL) Redacted() string { return u.raw.Redacted() }

// Addr is host:port for error messages.
func (u URL) Addr() string { return net.JoinHostPort(u.Host, u.Port) }

// WithDatabase returns the same URL pointing at another database.
func (u URL) WithDatabase(name string) URL {
	c := *u.raw
	c.Path = "/" + name
	out := u
	out.raw = &c
	out.Database = name
	return out
}

// redactErr keeps a password out of url.Parse's error text, which quotes the whole input.
func redactErr(err error, s string) string {
	msg := err.Error()
	if i := strings.Index(s, "@"); i > 0 {
		msg = strings.ReplaceAll(msg, s[:i], "***")
	}
	return msg
}
