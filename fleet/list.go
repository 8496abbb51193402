// Package fleet copies many databases: it lists a server's databases
// (ListDBs), selects them (Filter), and runs one replication job per
// database (Run) with the number of databases in flight sized by the
// per-host adaptive limiters (Limiter: the sofa package's), paced over an
// ideal duration if asked, with failures isolated per database, progress
// told through Progress and a JSON-ready Summary at the end.
//
// fleet does not know how one database is copied: Run calls a Job, which
// the caller builds around the replicate engine (package sofa's
// per-database job).
package fleet

import (
	"context"
	"errors"
	"fmt"
)

// Lister reads one page of a server's database names: the answer of
// `GET /_all_dbs?startkey=<JSON of startAfter>&limit=<limit>`, as the
// server gives it.
//
// An empty startAfter means from the first name (no startkey); limit <= 0
// means no limit. Because startkey is inclusive, a page normally begins
// with startAfter itself; ListDBs drops it. Servers that ignore startkey
// and limit (PouchDB Server) may return every name at once.
type Lister interface {
	AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error)
}

// ListerFunc adapts a function to Lister.
type ListerFunc func(ctx context.Context, startAfter string, limit int) ([]string, error)

// AllDBs calls f.
func (f ListerFunc) AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error) {
	return f(ctx, startAfter, limit)
}

// DefaultPageSize is the number of names ListDBs asks for per request.
const DefaultPageSize = 1000

// ErrPagingIgnored is returned by ListDBs when a server honours limit but
// ignores startkey: paging could not reach the names after the first page.
var ErrPagingIgnored = errors.New("the server ignores _all_dbs startkey but honours limit")

// ListDBs returns every database name of a server, in server order,
// without duplicates. It pages with startkey set to the last name seen, so
// names created or deleted meanwhile cannot shift a page and hide others
// (as skip would). pageSize <= 0 means DefaultPageSize.
//
// A page shorter than asked does not mean the end: servers differ in what
// they do with limit (CouchDB 3.2.0 answers one name less than asked), so
// ListDBs asks again after the last name until a page brings no new name.
// That costs one request more than trusting a short page, and never loses
// a name. A page longer than asked shows a server that ignores limit
// (PouchDB Server returns everything, in its own order); a full page of
// names already seen, on a server that honours limit, shows one that
// ignores startkey: ErrPagingIgnored rather than a silently truncated
// list.
func ListDBs(ctx context.Context, l Lister, pageSize int) ([]string, error) {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	var (
		names        []string
		seen         = map[string]bool{}
		last         string
		limitIgnored bool
	)
	for {
		ask := pageSize
		if last != "" {
			ask++ // the page may repeat last (startkey is inclusive)
		}
		page, err := l.AllDBs(ctx, last, ask)
		if err != nil {
			if last == "" {
				return nil, err
			}
			return nil, fmt.Errorf("after %q: %w", last, err)
		}
		if len(page) > ask {
			limitIgnored = true
		}
		fresh := 0
		for _, n := range page {
			if n == "" || seen[n] {
				continue
			}
			seen[n] = true
			names = append(names, n)
			fresh++
		}
		if fresh == 0 {
			if !limitIgnored && len(page) > 1 && len(page) >= ask {
				return nil, ErrPagingIgnored
			}
			return names, nil
		}
		next := page[len(page)-1]
		if next == last {
			return names, nil // not advancing
		}
		last = next
	}
}

// NameResolver says under which name a server keeps a database
// (couch.Server.StoredName).
type NameResolver interface {
	StoredName(ctx context.Context, name string) (string, error)
}

// Unmatched returns the names of listed (a server's _all_dbs) that name
// none of the databases names, in listed's order. A server may keep a
// database under another name than the one it is reached by (PouchDB
// Server drops "/": the copy of "a/b" is listed as "ab"), so each name
// that listed lacks verbatim is first resolved with r to the server's own
// name for it; one r cannot resolve (no such database) matches nothing.
func Unmatched(ctx context.Context, r NameResolver, names, listed []string) []string {
	onServer := make(map[string]bool, len(listed))
	for _, n := range listed {
		onServer[n] = true
	}
	matched := make(map[string]bool, len(names))
	for _, n := range names {
		if onServer[n] {
			matched[n] = true
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if stored, err := r.StoredName(ctx, n); err == nil {
			matched[stored] = true
		}
	}
	var out []string
	for _, n := range listed {
		if !matched[n] {
			out = append(out, n)
		}
	}
	return out
}
