package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"asterion/db"
	"asterion/handlers"
	"asterion/identity"
)

// serve migrates, bootstraps the first admin, then serves HTTP until ctx ends.
func (c *cli) serve(ctx context.Context, args []string) error {
	fs := newFlags("serve")
	cm := c.bindCommon(fs)
	addr := fs.String("addr", envOr(c.getenv, "ASTERION_ADDR", "127.0.0.1:8080"), "listen address host:port")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	_, _, verr := cm.validate(c.getenv)
	if err := errors.Join(verr, validateAddr(*addr)); err != nil {
		return err
	}
	// Take the port before touching the database, so a port in use fails at once.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: address already in use", *addr)
		}
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	defer ln.Close()

	cn, err := c.connect(ctx, cm, true, 20)
	if err != nil {
		return err
	}
	defer cn.close()
	log := cn.log
	applied, err := cn.migrateUp(ctx)
	if err != nil {
		return err
	}
	for _, a := range applied {
		log.Info("migration applied", "migration", a)
	}
	ids := identity.NewService(cn.bun)
	generated, created, err := ids.Bootstrap(ctx, c.getenv("ASTERION_ADMIN_PASSWORD"))
	if err != nil {
		return fmt.Errorf("bootstrap first admin: %w", err)
	}
	if created && generated != "" {
		log.Warn("created org default and user admin with a generated password; it is shown only once", "password", generated)
	} else if created {
		log.Info("created org default and user admin with the password from ASTERION_ADMIN_PASSWORD")
	}

	migrator, err := db.NewMigrator(cn.bun, cn.pool)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := handlers.New(handlers.Deps{
		Identity: ids,
		Logger:   log,
		Registry: reg,
		Version:  version,
		Ready: func(ctx context.Context) error {
			st, err := migrator.Status(ctx)
			if err != nil {
				return err
			}
			if !st.Current() {
				return errors.New("migrations pending")
			}
			return nil
		},
	})
	log.Info("serving", "addr", ln.Addr().String(), "database", cn.url.Redacted())
	return srv.Serve(ctx, ln)
}
