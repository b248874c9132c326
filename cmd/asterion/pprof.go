package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// validatePprofAddr accepts an empty address (the profiler is off) or a loopback one: the
// profiler has no authentication, so it must never listen where another machine can reach it.
func validatePprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ASTERION_PPROF_ADDR %q: want host:port", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("ASTERION_PPROF_ADDR %q: the profiler listens on a loopback address only (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// startPprof serves Go's profiler on addr (ASTERION_PPROF_ADDR, off when empty) until ctx
// ends. It listens apart from the app, so it is never exposed with it, and only on a loopback
// address. It does not serve cmdline: the command line may hold secrets.
func startPprof(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	if err := validatePprofAddr(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	log.Info("profiler listening", "addr", ln.Addr().String())
	return nil
}
