package handlers

import (
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"
)

// checkBulkCount compares the count the bulk confirmation showed (the form's expected field)
// with the number of jobs the action would touch now. A missing or malformed count is a 400;
// a different one is a 409 and nothing is done, so an operator never acts on a selection they
// did not see (jobs arrived or settled since, or the form was posted from elsewhere).
func checkBulkCount(expected string, now int) error {
	n, err := parseBulkExpected(expected)
	if err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "the bulk action lacks the count its confirmation showed; open the confirmation again")
	}
	if n != now {
		return fiber.NewError(fiber.StatusConflict, fmt.Sprintf(
			"the confirmation showed %d %s but %d match now; nothing was done: open the confirmation again to see the new selection",
			n, pluralJobs(n), now))
	}
	return nil
}

// parseBulkExpected reads the confirmed count: decimal digits only, 0..dashBulkCap.
func parseBulkExpected(s string) (int, error) {
	if s == "" || len(s) > 6 {
		return 0, fmt.Errorf("bulk count %q: want 0..%d", s, dashBulkCap)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("bulk count %q: want 0..%d", s, dashBulkCap)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > dashBulkCap {
		return 0, fmt.Errorf("bulk count %q: want 0..%d", s, dashBulkCap)
	}
	return n, nil
}

func pluralJobs(n int) string {
	if n == 1 {
		return "job"
	}
	return "jobs"
}
