package couch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// readRevsLimit asks for `_revs_limit`. PouchDB Server has no such route:
// its first 404 is remembered and the route never asked again; databases
// read at once wait for that first answer instead of each asking.
func (d *DB) readRevsLimit(ctx context.Context) (*http.Response, error) {
	if d.srv.Vendor == VendorPouchDB {
		d.srv.revsLimitMu.Lock()
		defer d.srv.revsLimitMu.Unlock()
	}
	if d.srv.noRevsLimit.Load() {
		return nil, &Error{Status: 404}
	}
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_revs_limit"})
	if StatusOf(err) == 404 && d.srv.Vendor == VendorPouchDB {
		d.srv.noRevsLimit.Store(true)
	}
	return resp, err
}

// Security reads `_security` (its JSON object, trimmed). A 404 of a
// database that exists (PouchDB Server before a first write) gives "{}";
// of a database that does not (deleted), an error wrapping
// replicate.ErrNotFound, never "{}": written to a copy, an empty
// `_security` would open it to every user.
func (d *DB) Security(ctx context.Context) ([]byte, error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"})
	if StatusOf(err) == 404 {
		if _, ierr := d.Info(ctx); ierr != nil {
			return nil, fmt.Errorf("read _security: %w", ierr)
		}
		return []byte("{}"), nil
	}
	if err != nil {
		return nil, d.fail("read _security", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, d.fail("read _security", err)
	}
	return bytes.TrimSpace(b), nil
}

// Metadata reads `_security`, `_revs_limit` and props.
func (d *DB) Metadata(ctx context.Context) (replicate.Metadata, error) {
	var m replicate.Metadata
	// The two reads go at once: a database's copy waits for both before
	// its first change, so their round trips add up otherwise.
	var limErr error
	limDone := make(chan struct{})
	go func() {
		defer close(limDone)
		resp, err := d.readRevsLimit(ctx)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m.RevsLimit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		} else if st := StatusOf(err); st != 404 && st != 400 && st != 405 {
			limErr = d.fail("read _revs_limit", err)
		}
	}()
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"})
	if err == nil {
		m.Security, _ = io.ReadAll(resp.Body)
		m.Security = bytes.TrimSpace(m.Security)
		resp.Body.Close()
	} else if st := StatusOf(err); st != 404 && st != 403 && st != 401 {
		<-limDone
		return m, d.fail("read _security", err)
	}
	<-limDone
	if limErr != nil {
		return m, limErr
	}
	d.mu.Lock()
	read, part := d.infoRead, d.partitioned
	d.mu.Unlock()
	if !read {
		info, err := d.Info(ctx)
		if err != nil {
			return m, err
		}
		part = info.Partitioned
	}
	m.Partitioned = part
	return m, nil
}

// SetMetadata writes `_revs_limit` (BeforeDocs; 404 tolerated) or
// `_security` (AfterDocs).
func (d *DB) SetMetadata(ctx context.Context, m replicate.Metadata, phase replicate.MetadataPhase) error {
	switch phase {
	case replicate.BeforeDocs:
		// A database this client has just created has CouchDB's fixed
		// default (1000): setting it again would cost a request per
		// database for nothing.
		// An existing database is read first and written only when it
		// differs: a rerun that copies nothing writes nothing (each PUT
		// adds to the database file and its update_seq).
		if m.RevsLimit > 0 && !(d.fresh && m.RevsLimit == defaultRevsLimit) && (d.fresh || !d.revsLimitIs(ctx, m.RevsLimit, true)) {
			resp, err := d.srv.do(ctx, &request{Method: "PUT", Path: d.path + "/_revs_limit", Body: []byte(strconv.Itoa(m.RevsLimit)), ContentType: "application/json"})
			if err != nil {
				if st := StatusOf(err); st == 404 || st == 405 || st == 400 {
					return nil // PouchDB Server has no _revs_limit route
				}
				if Denied(err) {
					d.notAdmin.Store(true)
					if d.revsLimitIs(ctx, m.RevsLimit, false) {
						return nil // refused, but already what the source has
					}
					return fmt.Errorf("%s: _revs_limit not set to %d: %w: the account is not an admin of the database (%w)", d, m.RevsLimit, replicate.ErrMetadataRefused, err)
				}
				return d.fail("set _revs_limit", err)
			}
			resp.Body.Close()
		}
	case replicate.AfterDocs:
		if len(m.Security) > 0 && d.name == UsersDB {
			return d.setUsersSecurity(ctx, m.Security)
		}
		if len(m.Security) > 0 {
			if d.fresh && d.holdsDefaultSecurity(ctx, m.Security) {
				return nil // what a PUT would write is already there
			}
			if !d.fresh && d.securityIsOr(ctx, m.Security, true) {
				return nil // already the source's (read, not written again)
			}
			if d.notAdmin.Load() {
				// CouchDB 3 answers a member's PUT with 500 no_majority,
				// which would be retried: the _revs_limit refusal said it.
				if d.securityIs(ctx, m.Security) {
					return nil // refused, but already what the source has
				}
				return fmt.Errorf("%s: _security not set: %w: the account is not an admin of the database", d, replicate.ErrMetadataRefused)
			}
			resp, err := d.putSecurity(ctx, m.Security)
			if Denied(err) || err != nil && d.notAdmin.Load() {
				if d.securityIs(ctx, m.Security) {
					return nil
				}
				return fmt.Errorf("%s: _security not set: %w: the account is not an admin of the database (%w)", d, replicate.ErrMetadataRefused, err)
			}
			if err != nil {
				return d.fail("set _security", err)
			}
			resp.Body.Close()
		}
	}
	return nil
}

// securityIs reports whether the database's `_security` reads as want
// (as JSON values: key order aside); a failed read answers false.
func (d *DB) securityIs(ctx context.Context, want []byte) bool {
	return d.securityIsOr(ctx, want, false)
}

// securityIsOr is securityIs; with record, a `_security` read that
// differs is kept as what a write would replace (MetadataReplaced).
func (d *DB) securityIsOr(ctx context.Context, want []byte, record bool) bool {
	var w, got any
	if json.Unmarshal(want, &w) != nil {
		return false
	}
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"})
	if err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if err != nil || json.Unmarshal(b, &got) != nil {
		return false
	}
	if reflect.DeepEqual(got, w) {
		return true
	}
	if record {
		d.mu.Lock()
		d.replacedSec = b
		d.mu.Unlock()
	}
	return false
}

// MetadataReplaced returns the `_security` and `_revs_limit` this
// handle's SetMetadata read on the database (not one it created) and
// then wrote the source's over: nil and 0 for what it left as it was.
func (d *DB) MetadataReplaced() (security []byte, revsLimit int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.replacedSec, d.replacedRevsLimit
}

// revsLimitIs reports whether the database's `_revs_limit` reads as
// want; a failed read (a member may be refused it too) answers false.
func (d *DB) revsLimitIs(ctx context.Context, want int, record bool) bool {
	resp, err := d.readRevsLimit(ctx)
	if err != nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	resp.Body.Close()
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil && n != want && record {
		d.mu.Lock()
		d.replacedRevsLimit = n
		d.mu.Unlock()
	}
	return err == nil && n == want
}

// RevsLimit reads `_revs_limit`: 0 with no error from a server without
// that route (PouchDB Server); a database that does not exist gives an
// error wrapping replicate.ErrNotFound.
func (d *DB) RevsLimit(ctx context.Context) (int, error) {
	resp, err := d.readRevsLimit(ctx)
	if StatusOf(err) == 404 && d.srv.noRevsLimit.Load() {
		return 0, nil
	}
	if err != nil {
		return 0, d.fail("read _revs_limit", err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	resp.Body.Close()
	if err != nil {
		return 0, d.fail("read _revs_limit", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: _revs_limit %q is no number", d, b)
	}
	return n, nil
}

// defaultRevsLimit is the `_revs_limit` of a new CouchDB database (not
// configurable).
const defaultRevsLimit = 1000

// holdsDefaultSecurity reports whether sec equals the `_security` a new
// database on this server starts with, which a database this client has
// just created (Fresh) still holds. The default is read once per server,
// from the first such database; a failed read answers false (the caller
// then writes sec).
func (d *DB) holdsDefaultSecurity(ctx context.Context, sec []byte) bool {
	var want any
	if json.Unmarshal(sec, &want) != nil {
		return false
	}
	def := d.srv.freshSecurity.Load()
	if def == nil {
		d.srv.freshSecMu.Lock() // databases finishing together ask once
		defer d.srv.freshSecMu.Unlock()
		def = d.srv.freshSecurity.Load()
	}
	if def == nil {
		resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"})
		if err != nil {
			return false
		}
		var got any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			return false
		}
		d.srv.freshSecurity.Store(&got)
		def = &got
	}
	return reflect.DeepEqual(*def, want)
}
