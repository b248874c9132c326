package fairshare

// The named statements, for the tests that read their plans.
const (
	VehicleJobSQL = vehicleJobSQL
	QueuedOrgsSQL = queuedOrgsSQL
	CandidatesSQL = candidatesSQL
	RefusedSQL    = refusedSQL
)
