package couch

import (
	"strings"
	"sync"
	"sync/atomic"
)

// kindCounts counts request attempts by kind ("PUT /db", "POST
// /db/_bulk_docs", "GET /db/_local"): which requests a run needs, per
// database, is what decides its speed against a busy server.
type kindCounts struct {
	m sync.Map // kind string -> *atomic.Int64
}

func (k *kindCounts) add(method, path string) {
	kind := method + " " + requestKind(path)
	v, ok := k.m.Load(kind)
	if !ok {
		v, _ = k.m.LoadOrStore(kind, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func (k *kindCounts) snapshot() map[string]int64 {
	out := map[string]int64{}
	k.m.Range(func(key, v any) bool {
		out[key.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// requestKind classifies a request path (relative to the server, escaped)
// without naming the database or document: "/", "/_all_dbs", "/db",
// "/db/_changes", "/db/_local", "/db/_design", "/db/doc",
// "/db/doc/attachment".
func requestKind(path string) string {
	p := strings.Trim(path, "/")
	if p == "" {
		return "/"
	}
	parts := strings.SplitN(p, "/", 3)
	if strings.HasPrefix(parts[0], "_") {
		return "/" + parts[0]
	}
	switch len(parts) {
	case 1:
		return "/db"
	case 2:
		if strings.HasPrefix(parts[1], "_") {
			return "/db/" + parts[1]
		}
		return "/db/doc"
	}
	switch parts[1] {
	case "_local", "_design":
		if strings.Contains(parts[2], "/") {
			return "/db/" + parts[1] + "/attachment"
		}
		return "/db/" + parts[1]
	}
	return "/db/doc/attachment"
}

// Kinds returns the attempts sent so far by kind, e.g. {"PUT /db": 1000,
// "POST /db/_bulk_docs": 1000}; a snapshot, safe for concurrent use.
func (c *Counters) Kinds() map[string]int64 {
	return c.kinds.snapshot()
}
