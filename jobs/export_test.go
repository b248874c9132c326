package jobs

// WatchTransitions makes every transition of s tell f its label and the text of its job
// UPDATE, until the returned function is called.
func WatchTransitions(s *Service, f func(label, query string)) (stop func()) {
	return watchTransitions(s, f)
}
