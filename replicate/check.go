package replicate

import "fmt"

// Check refuses negative values where only zero (the default) and
// positive ones have a meaning: BatchSize, Workers, FetchBatch,
// WriteBatchDocs, WriteBatchBytes, MaxInflightBytes and
// CheckpointInterval (StreamThreshold's negative means never).
func (o Options) Check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"batch size", int64(o.BatchSize)}, {"workers", int64(o.Workers)}, {"fetch batch", int64(o.FetchBatch)},
		{"write batch documents", int64(o.WriteBatchDocs)}, {"write batch bytes", o.WriteBatchBytes},
		{"in-flight bytes", o.MaxInflightBytes},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s %d: want 0 (the default) or more", f.name, f.v)
		}
	}
	if o.CheckpointInterval < 0 {
		return fmt.Errorf("checkpoint interval %v: want 0 (the default, %v) or more", o.CheckpointInterval, DefaultCheckpointInterval)
	}
	return nil
}
