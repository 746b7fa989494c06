package agents

// NewSessionsForTest returns Sessions without a manager, for Spec alone.
func NewSessionsForTest(opts Options) *Sessions { return &Sessions{opts: opts} }
