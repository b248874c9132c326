package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"asterion/db"
	"asterion/handlers"
)

// common are the settings every subcommand that touches the database shares.
type common struct {
	databaseURL string
	json        bool
	logLevel    string
	dbWait      time.Duration
	// statementTimeout is ASTERION_STATEMENT_TIMEOUT (0: db's default); noStatementTimeout
	// leaves it off (migrate, whose DDL may run long).
	statementTimeout   time.Duration
	noStatementTimeout bool
}

// bindCommon adds --database-url, --json and --log-level with their environment defaults.
func (c *cli) bindCommon(fs *flag.FlagSet) *common {
	cm := &common{}
	fs.StringVar(&cm.databaseURL, "database-url", c.getenv("DATABASE_URL"), "PostgreSQL URL (default $DATABASE_URL)")
	fs.BoolVar(&cm.json, "json", false, "print JSON for scripts")
	fs.StringVar(&cm.logLevel, "log-level", envOr(c.getenv, "ASTERION_LOG_LEVEL", "info"), "debug, info, warn or error")
	return cm
}

// validate checks the shared settings and returns every mistake, one per line.
func (cm *common) validate(getenv env) (db.URL, slog.Level, error) {
	var errs []error
	u, err := db.ParseURL(cm.databaseURL)
	if err != nil {
		errs = append(errs, err)
	}
	level, err := parseLevel(cm.logLevel)
	if err != nil {
		errs = append(errs, err)
	}
	cm.dbWait = 30 * time.Second
	if s := getenv("ASTERION_DB_WAIT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("ASTERION_DB_WAIT: want a duration like 30s, got %q", s))
		} else {
			cm.dbWait = d
		}
	}
	if s := getenv("ASTERION_STATEMENT_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Millisecond {
			errs = append(errs, fmt.Errorf("ASTERION_STATEMENT_TIMEOUT: want a duration like 15s, got %q", s))
		} else {
			cm.statementTimeout = d
		}
	}
	return u, level, errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level: want debug, info, warn or error, got %q", s)
}

// validateAddr checks a listen address of the form host:port.
func validateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: want host:port", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("listen address %q: bad port", addr)
	}
	_ = host
	return nil
}

func (c *cli) newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(c.stderr, &slog.HandlerOptions{Level: level}))
}

func envOr(getenv env, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// httpLimits reads the transport limits: ASTERION_MAX_CONNS_PER_IP (open connections of one
// client address, default 256) and ASTERION_TRUSTED_PROXIES (comma-separated CIDRs of the
// reverse proxies whose X-Forwarded-For names the client; none by default).
func httpLimits(getenv env) (handlers.Limits, error) {
	var l handlers.Limits
	if s := getenv("ASTERION_MAX_CONNS_PER_IP"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return l, fmt.Errorf("ASTERION_MAX_CONNS_PER_IP: want a positive number, got %q", s)
		}
		l.MaxConnsPerIP = n
	}
	proxies, err := handlers.ParseTrustedProxies(getenv("ASTERION_TRUSTED_PROXIES"))
	if err != nil {
		return l, fmt.Errorf("ASTERION_TRUSTED_PROXIES: %w", err)
	}
	l.TrustedProxies = proxies
	return l, l.Validate()
}
