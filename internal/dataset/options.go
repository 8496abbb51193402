package dataset

import "math"

// Options shrink the real data sets so that tests stay quick.
type Options struct {
	// Scale is the fraction of each collection kept (countries, cities per
	// country, emoji records, sprite sheets), rounded up so that at least
	// one item stays; 0 or anything >= 1 keeps everything.
	Scale float64
	// Limit caps the items of each collection after Scale; 0 means no cap.
	Limit int
}

// keep returns how many of n items to keep.
func (o Options) keep(n int) int {
	k := n
	if o.Scale > 0 && o.Scale < 1 {
		k = int(math.Ceil(float64(n) * o.Scale))
	}
	if o.Limit > 0 && k > o.Limit {
		k = o.Limit
	}
	return min(k, n)
}
