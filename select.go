package sofa

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/storage"
)

// Selection picks databases by name. An empty Include keeps every
// database; Exclude wins over Include; Skip lists names left out unless
// Include names them (see fleet.Filter).
type Selection struct {
	Include []string
	Exclude []string
	Skip    []string
	// Shard keeps only the databases of one shard of a whole-server run
	// (see Shard; applied after Include, Exclude and Skip). The zero
	// Shard keeps them all.
	Shard Shard
	// Sharded says the selection is one part of a larger run: it may
	// hold no database. Without it (and without Shard) a selection that
	// matches nothing is an error.
	Sharded bool
}

func (s Selection) filter() fleet.Filter {
	return fleet.Filter{Include: s.Include, Exclude: s.Exclude, Skip: s.Skip}
}

// holds reports whether the selection keeps the database name: its
// filter (Include, Exclude, Skip) and its shard. It is the one place a
// selection decides about a name (a listing, a database a watch names).
func (s Selection) holds(name string) bool {
	return s.filter().Match(name) && s.Shard.Holds(name)
}

// apply returns the names the selection keeps (see holds), in order.
func (s Selection) apply(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if s.holds(n) {
			out = append(out, n)
		}
	}
	return out
}

// skipped returns the names the selection's Skip alone leaves out (its
// Include, Exclude and shard keep them), in order, each with why
// (fleet.SkipReason): a run lists them in its Summary's LeftOut, so that
// a whole-server run says which system databases it did not copy.
func (s Selection) skipped(names []string) []fleet.LeftOut {
	loose := s
	loose.Skip = nil
	var out []fleet.LeftOut
	for _, n := range names {
		if loose.holds(n) && !s.holds(n) {
			out = append(out, fleet.LeftOut{Name: n, Reason: fleet.SkipReason(n)})
		}
	}
	return out
}

// ErrNoneSelected is wrapped by the error of a call whose Selection
// matched no database (and is not one part of a sharded run).
var ErrNoneSelected = errors.New("the selection matches no database")

// noneMatched is the one rule for a selection that matched nothing
// (matched databases: 0): an error wrapping ErrNoneSelected, worded by
// format and args, unless the
// selection is one part of a larger run (Sharded, or a Shard), whose part
// may hold none. nil when something matched.
func (s Selection) noneMatched(matched int, format string, args ...any) error {
	if matched > 0 || s.Sharded || s.Shard.Sharded() {
		return nil
	}
	return fmt.Errorf(format+"%.0w", append(args, ErrNoneSelected)...)
}

// An OptionError says the options (or arguments) of a call are wrong,
// not the endpoints: nothing was done. Its message is the problem's.
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// nameErr is err of creating an archive, an *OptionError when the name
// is the problem (it exists, without Overwrite; a directory; not a
// regular file): nothing was done.
func nameErr(err error) error {
	if errors.Is(err, storage.ErrExist) || errors.Is(err, storage.ErrIsDir) || errors.Is(err, storage.ErrNotFile) {
		return &OptionError{Err: err}
	}
	return err
}

func optionErr(format string, args ...any) error {
	return &OptionError{Err: fmt.Errorf(format, args...)}
}

// SelectDBs lists the databases an operation on ep works on: the one of
// a database endpoint (which must exist), or the server's databases kept
// by sel. role names ep in errors ("source").
//
// With sel.Shard, only the databases of that shard are kept (an empty
// shard is no error) and ep must be a server; so must it with
// sel.Include or sel.Exclude (an *OptionError otherwise).
func SelectDBs(ctx context.Context, ep *Endpoint, sel Selection, role string) ([]string, error) {
	dbs, _, err := selectDBs(ctx, ep, sel, role)
	return dbs, err
}

// selectDBs is SelectDBs, and the databases of the listing its Skip
// alone left out (see skipped), for the run's Summary.LeftOut.
func selectDBs(ctx context.Context, ep *Endpoint, sel Selection, role string) ([]string, []fleet.LeftOut, error) {
	if err := sel.Validate(); err != nil {
		return nil, nil, err
	}
	if ep.couch == nil {
		return nil, nil, optionErr("%s: %s is an archive, not a server or database", role, ep)
	}
	if sel.Shard.Sharded() && ep.couch.DBName != "" {
		return nil, nil, optionErr("--shard %s: %s is a database; a sharded run needs a server URL", sel.Shard, ep)
	}
	if ep.couch.DBName != "" && (len(sel.Include) > 0 || len(sel.Exclude) > 0) {
		return nil, nil, optionErr("--include and --exclude select databases of a server; %s %s is a database", role, ep)
	}
	if ep.couch.DBName != "" {
		if _, err := ep.couch.Server.DB(ep.couch.DBName).Info(ctx); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", role, err)
		}
		return []string{ep.couch.DBName}, nil, nil
	}
	names, err := fleet.ListDBs(ctx, ep.couch.Server, 1000)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: list databases: %w", role, err)
	}
	dbs := sel.apply(names)
	if err := sel.noneMatched(len(dbs), "%s: no database matches (of %d listed)", role, len(names)); err != nil {
		return nil, nil, err
	}
	return dbs, sel.skipped(names), nil
}

// WithoutUsers returns skip without _users when withUsers is set.
func WithoutUsers(skip []string, withUsers bool) []string {
	if !withUsers {
		return skip
	}
	var out []string
	for _, s := range skip {
		if s != "_users" {
			out = append(out, s)
		}
	}
	return out
}

// Validate refuses malformed patterns and a shard out of range (an
// *OptionError).
func (s Selection) Validate() error {
	if err := s.filter().Validate(); err != nil {
		return &OptionError{Err: err}
	}
	return s.Shard.Validate()
}
