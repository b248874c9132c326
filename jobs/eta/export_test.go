package eta

// JobSQL is the place query of one job, for the test that reads its plan.
const JobSQL = etaJobSQL
