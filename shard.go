package sofa

import (
	"fmt"
	"github.com/sofadb/sofa/archive"
	"strconv"
	"strings"
)

// A Shard is one of Count parts of a whole-server run: the databases
// whose name hashes to Index (see ShardOf). Count workers, each given one
// Index, together cover every database exactly once, whenever each lists
// the server. The zero Shard (Count 0) is no sharding: every database.
type Shard struct {
	Index int // 0 <= Index < Count
	Count int // number of workers; 0: not sharded
}

// Sharded reports whether s selects one part of a run (Count > 0).
func (s Shard) Sharded() bool { return s.Count > 0 }

// String is "i/n", as ParseShard reads it ("" when not sharded).
func (s Shard) String() string {
	if !s.Sharded() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Validate refuses a shard outside 0 <= Index < Count (an *OptionError).
// The zero Shard is valid.
func (s Shard) Validate() error {
	if s.Count == 0 && s.Index == 0 {
		return nil
	}
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return optionErr("--shard %d/%d: want i/n with n >= 1 and 0 <= i < n", s.Index, s.Count)
	}
	return nil
}

// Holds reports whether the database name belongs to s (always, when
// not sharded).
func (s Shard) Holds(name string) bool {
	return !s.Sharded() || ShardOf(name, s.Count) == s.Index
}

// ParseShard reads "i/n" (an *OptionError when malformed or out of
// range). "" is the zero Shard.
func ParseShard(v string) (Shard, error) {
	if v == "" {
		return Shard{}, nil
	}
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, optionErr("--shard %q: want i/n (this worker's index i of n workers, 0 <= i < n)", v)
	}
	s := Shard{Index: i, Count: n}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, optionErr("--shard %q: want i/n with n >= 1 and 0 <= i < n", v)
	}
	return s, nil
}

// ShardOf is the shard, of n, that the database name belongs to: the
// 64-bit FNV-1a hash of the name's UTF-8 bytes, modulo n. It depends on
// the name alone (never on a listing's order or length), so workers that
// list the server at different times agree; it is fixed forever (a
// sharded backup's set is read with it). n must be >= 1.
func ShardOf(name string, n int) int { return archive.ShardOf(name, n) }
