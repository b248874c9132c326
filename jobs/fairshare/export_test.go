package fairshare

// The named statements, for the tests that read their plans.
const (
	VehicleJobSQL = vehicleJobSQL
	QueuedOrgsSQL = queuedOrgsSQL
	CandidatesSQL = candidatesSQL
	RefusedSQL    = refusedSQL
)

// DispatchLock is the key of the dispatch lock, for the test that holds it.
const DispatchLock = dispatchLock
