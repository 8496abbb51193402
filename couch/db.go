package couch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// DefaultChangesPage is the `_changes` page size (rows per request) on
// PouchDB Server and any server whose Caps say nothing else (Apache
// CouchDB: 10,000, see Caps.ChangesPage).
const DefaultChangesPage = 2000

// DB is one database on a Server. It implements replicate.Source and
// replicate.Target.
type DB struct {
	srv  *Server
	name string
	path string // "/" + escaped name
	// readOnly, fresh, inlineMax, changesPage and multipart are set at
	// open time (DBOptions).
	readOnly, fresh bool
	inlineMax       int64
	changesPage     int
	multipart       bool
	mu              sync.Mutex
	partitioned     bool // props.partitioned from the last Info
	infoRead        bool
	localRevs       map[string]string // _local id (no prefix) -> _rev last written
	// replacedSec and replacedRevsLimit are what SetMetadata read on
	// the database before writing other values over them (MetadataReplaced).
	replacedSec       []byte
	replacedRevsLimit int
	// BulkGetUnsupported is set once `_bulk_get` failed; reads then use
	// `open_revs` GETs.
	bulkGetOff bool
	// attBatchOff: a `_bulk_get` of attachments inline was refused
	// (ReadAttachments); attachments are then read one at a time.
	attBatchOff atomic.Bool
	// notAdmin: setting a property was refused for lack of rights.
	notAdmin atomic.Bool
	// pending is the `pending` of the last changes page read, plus one
	// (zero: not known).
	pending atomic.Int64
}

var (
	_ replicate.Source = (*DB)(nil)
	_ replicate.Target = (*DB)(nil)
)

// Name is the decoded database name.
func (d *DB) Name() string { return d.name }

// ReadOnly reports whether the handle refuses `_local` writes without a
// request (DBOptions.ReadOnly).
func (d *DB) ReadOnly() bool { return d.readOnly }

// Fresh reports whether the handle is of a database this process has just
// created (DBOptions.Fresh; see Created).
func (d *DB) Fresh() bool { return d.fresh }

// Server is the server holding the database.
func (d *DB) Server() *Server { return d.srv }

func (d *DB) String() string { return d.srv.URL() + d.path }

func (d *DB) fail(op string, err error) error {
	switch StatusOf(err) {
	case 401:
		return fmt.Errorf("%s: %s: %w", d, op, d.srv.authErr(err))
	case 403:
		return fmt.Errorf("%s: %s: forbidden (HTTP 403): %w", d, op, err)
	case 404:
		return fmt.Errorf("%s: %s: %w (HTTP 404)", d, op, replicate.ErrNotFound)
	case 0:
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%s: %s: %w", d, op, err)
	}
	return fmt.Errorf("%s: %s: %w", d, op, err)
}

// Identity names the database for replication ids: the server's uuid
// (or its URL without credentials when it has none) and the db name.
func (d *DB) Identity() string {
	id := d.srv.UUID
	if id == "" {
		id = d.srv.URL()
	}
	return id + "/" + d.name
}

// Created describes a database this client has just created: empty, so
// a replication into it needs neither its info nor its checkpoints.
func (d *DB) Created() *replicate.DBInfo {
	return &replicate.DBInfo{Name: d.name, Identity: d.Identity()}
}

// Info reads `GET /db`.
func (d *DB) Info(ctx context.Context) (replicate.DBInfo, error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path})
	if err != nil {
		return replicate.DBInfo{}, d.fail("open database", err)
	}
	defer resp.Body.Close()
	var info dbInfoJSON
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.DBName == "" {
		return replicate.DBInfo{}, fmt.Errorf("%s: not a CouchDB database (GET answered without db_name)", d)
	}
	return d.useInfo(ctx, &info)
}

// dbInfoJSON is the part of a database's info (`GET /db`, or one row of
// `_dbs_info`) that sofa reads.
type dbInfoJSON struct {
	DBName        string          `json:"db_name"`
	DocCount      int64           `json:"doc_count"`
	DocDelCount   *int64          `json:"doc_del_count"` // PouchDB Server has none
	UpdateSeq     json.RawMessage `json:"update_seq"`
	InstanceStart json.RawMessage `json:"instance_start_time"`
	Props         struct {
		Partitioned bool `json:"partitioned"`
	} `json:"props"`
	Sizes struct {
		External int64 `json:"external"`
	} `json:"sizes"`
}

// useInfo records what d learns from its info and returns it as a
// replicate.DBInfo (without the server's own document of a system
// database in its count).
func (d *DB) useInfo(ctx context.Context, info *dbInfoJSON) (replicate.DBInfo, error) {
	ist := string(info.InstanceStart)
	if len(ist) >= 2 && ist[0] == '"' {
		ist = jsonx.Unquote(info.InstanceStart)
	}
	id := d.Identity()
	d.mu.Lock()
	d.partitioned, d.infoRead = info.Props.Partitioned, true
	d.mu.Unlock()
	out := replicate.DBInfo{
		Name: info.DBName, DocCount: info.DocCount, DelCountUnknown: info.DocDelCount == nil,
		UpdateSeq: replicate.Seq(info.UpdateSeq), InstanceStart: ist,
		Partitioned: info.Props.Partitioned, Identity: id, Bytes: info.Sizes.External,
	}
	if info.DocDelCount != nil {
		out.DelCount = *info.DocDelCount
	}
	// The server's own document of a system database is not the user's:
	// it is never copied, so it is not counted either.
	if own, err := d.ownedLive(ctx); err != nil {
		return replicate.DBInfo{}, err
	} else if own && out.DocCount > 0 {
		out.DocCount--
	}
	return out, nil
}

// GetLocal reads `_local/<id>`.
func (d *DB) GetLocal(ctx context.Context, id string) ([]byte, error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.localDocPath(id)})
	if err != nil {
		if StatusOf(err) == 404 {
			return nil, replicate.ErrNotFound
		}
		return nil, d.fail("read checkpoint", err)
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func (d *DB) localDocPath(id string) string {
	return d.path + "/" + EscapeDocID("_local/"+strings.TrimPrefix(id, "_local/"))
}

// PutLocal writes `_local/<id>`. 401/403 give replicate.ErrReadOnly.
func (d *DB) PutLocal(ctx context.Context, id string, body []byte) error {
	if d.readOnly {
		return replicate.ErrReadOnly
	}
	resp, err := d.srv.do(ctx, &request{Method: "PUT", Path: d.localDocPath(id), Body: body, ContentType: "application/json"})
	if err != nil {
		var he *Error
		if errors.As(err, &he) && he.Status == 401 && badCredentials(he.Reason) {
			return d.fail("write checkpoint", d.srv.Client.authErr(err)) // no rights issue: a wrong password
		}
		if st := StatusOf(err); st == 401 || st == 403 {
			return fmt.Errorf("%w: %w", replicate.ErrReadOnly, err)
		}
		return d.fail("write checkpoint", err)
	}
	defer resp.Body.Close()
	var ok struct {
		Rev string `json:"rev"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&ok) == nil && ok.Rev != "" {
		d.setLocalRev(id, ok.Rev)
	}
	return nil
}

func (d *DB) setLocalRev(id, rev string) {
	d.mu.Lock()
	if d.localRevs == nil {
		d.localRevs = map[string]string{}
	}
	d.localRevs[strings.TrimPrefix(id, "_local/")] = rev
	d.mu.Unlock()
}

// LocalRev is the `_rev` the last successful PutLocal of id gave it.
func (d *DB) LocalRev(id string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rev, ok := d.localRevs[strings.TrimPrefix(id, "_local/")]
	return rev, ok
}
