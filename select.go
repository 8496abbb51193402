package sofa

import (
	"context"
	"fmt"

	"github.com/sofadb/sofa/fleet"
)

// Selection picks databases by name. An empty Include keeps every
// database; Exclude wins over Include; Skip lists names left out unless
// Include names them (see fleet.Filter).
type Selection struct {
	Include []string
	Exclude []string
	Skip    []string
	// Sharded says the selection is one shard of a larger run: a shard
	// may hold no database. Without it a selection that matches nothing
	// is an error.
	Sharded bool
}

func (s Selection) filter() fleet.Filter {
	return fleet.Filter{Include: s.Include, Exclude: s.Exclude, Skip: s.Skip}
}

// An OptionError says the options (or arguments) of a call are wrong,
// not the endpoints: nothing was done. Its message is the problem's.
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

func optionErr(format string, args ...any) error {
	return &OptionError{Err: fmt.Errorf(format, args...)}
}

// SelectDBs lists the databases an operation on ep works on: the one of
// a database endpoint (which must exist), or the server's databases kept
// by sel. role names ep in errors ("source").
func SelectDBs(ctx context.Context, ep *Endpoint, sel Selection, role string) ([]string, error) {
	f := sel.filter()
	if err := f.Validate(); err != nil {
		return nil, &OptionError{Err: err}
	}
	if ep.couch == nil {
		return nil, optionErr("%s: %s is an archive, not a server or database", role, ep)
	}
	if ep.couch.DBName != "" {
		if _, err := ep.couch.Server.DB(ep.couch.DBName).Info(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", role, err)
		}
		return []string{ep.couch.DBName}, nil
	}
	names, err := fleet.ListDBs(ctx, ep.couch.Server, 1000)
	if err != nil {
		return nil, fmt.Errorf("%s: list databases: %w", role, err)
	}
	dbs := f.Apply(names)
	if len(dbs) == 0 && !sel.Sharded {
		return nil, fmt.Errorf("%s: no database matches (of %d listed)", role, len(names))
	}
	return dbs, nil
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

// Validate refuses malformed patterns (an *OptionError).
func (s Selection) Validate() error {
	if err := s.filter().Validate(); err != nil {
		return &OptionError{Err: err}
	}
	return nil
}
