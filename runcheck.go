package sofa

import "github.com/sofadb/sofa/replicate"

// checkRun refuses, as an *OptionError, negative values of a run's
// options where only zero (the default) and positive ones mean
// something: MaxDBs, IdealDuration, the engine's sizes and counts, and
// the replicas and shards of created databases.
func checkRun(rc RunControl, e replicate.Options, q, n int) error {
	if err := e.Check(); err != nil {
		return &OptionError{Err: err}
	}
	switch {
	case rc.MaxDBs < 0:
		return optionErr("databases at once %d: want 0 (the default, %d) or more", rc.MaxDBs, DefaultMaxDBs)
	case rc.IdealDuration < 0:
		return optionErr("ideal duration %v: want 0 (no spreading) or more", rc.IdealDuration)
	case q < 0 || n < 0:
		return optionErr("shards %d, replicas %d: want 0 (the target's default) or more", q, n)
	}
	return nil
}
