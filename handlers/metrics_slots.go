package handlers

// metricsConcurrency is how many queue-metrics computations run at once in one server. The
// windowed aggregate reads every job finished in the window (up to 744 h), so its cost grows
// with the window and the history; the bound keeps such calls from taking the whole connection
// pool (twenty calls would otherwise hold all twenty connections), while the request deadline
// and statement_timeout bound each one.
const metricsConcurrency = 2

// metricsSlot takes one of the metricsConcurrency slots without waiting; ok is false when all
// are busy. release gives the slot back.
func (s *Server) metricsSlot() (release func(), ok bool) {
	select {
	case s.metricsSlots <- struct{}{}:
		return func() { <-s.metricsSlots }, true
	default:
		return nil, false
	}
}
