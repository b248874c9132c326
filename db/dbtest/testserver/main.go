// Command testserver prints the URL of the PostgreSQL server the tests use, starting the
// tests' own private cluster when nothing answers on 127.0.0.1:5432 (see dbtest.FindServer),
// and says in one line on stderr which server that is. make test runs it once before the
// packages, so that they share one server and a person sees which.
package main

import (
	"fmt"
	"os"
	"strings"

	"asterion/db/dbtest"
)

func main() {
	srv, err := dbtest.FindServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbtest: "+strings.Join(strings.Fields(err.Error()), " "))
		os.Exit(1)
	}
	if srv.Private {
		fmt.Fprintln(os.Stderr, srv.Line())
	}
	fmt.Println(srv.URL)
}
