package jobs

// RiverPriority maps a job priority 0..100 (lower runs first) onto River's four levels by the
// bands of job priorities (docs/architecture.md): 0–10 → 1, 11–40 → 2, 41–59 → 3, 60–100 → 4. Within a band River runs
// the oldest first.
func RiverPriority(p int) int {
	switch {
	case p <= 10:
		return 1
	case p <= 40:
		return 2
	case p <= 59:
		return 3
	}
	return 4
}
