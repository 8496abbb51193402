package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/replicate"
)

type restoreCmd struct {
	engine         engineFlags
	client         clientFlags
	control        controlFlags
	out            outputFlags
	include        []string
	exclude        []string
	renames        []string
	reuseExisting  bool
	replace        bool
	withReplicator bool
	q, n           int
}

func newRestoreCmd() *cobra.Command {
	c := &restoreCmd{}
	cmd := &cobra.Command{
		Use:   "restore ARCHIVE... TARGET",
		Short: "Restore archives (a full one and its incrementals, in order) into a server or database",
		Long: `Restore the databases of an archive into TARGET, a server URL (every
database under its own name, or --rename OLD=NEW) or a database URL (an
archive holding one database, or --include selecting one). Several archives
are a chain: a full archive, then its incrementals in order; archives that
do not form a chain are refused. ARCHIVE - reads stdin.

Databases are created with their original properties (partitioned; q and n
only with --q/--n), _revs_limit is set first, design documents are written
after the other documents and _security last. _users is restored;
_replicator only with --with-replicator (its documents would start
replications on the target); both are written into the ones the target
server created itself. A non-empty target database is refused unless
--reuse-existing, or an earlier run of this restore claimed it (a killed
restore resumes: run the same command again). In a chain, a database
recreated at the source between two backups is restored from the archive
that holds it in full.

A restore only adds revisions: over an existing database holding newer
revisions (--reuse-existing) the newer ones stay the winners, and the
result says so per database ("ok with warnings", with the number of
documents whose winning revision is not the archive's). To roll a
database back to the archive, use --replace: it DELETES each existing
target database the restore selects (every document, revision, attachment
and _local checkpoint in it is lost), recreates it with the same
partitioned flag, q and n (unless --q/--n) and _security, and restores
into it; the archive's _security, when it holds one, is set last as in
every restore. _users and _replicator are never deleted: they are written
into. --replace and --reuse-existing cannot be given together.

` + exitCodesHelp,
		Example: `  sofa restore full.sofa http://admin:pw@new:5984
  sofa restore full.sofa inc1.sofa inc2.sofa http://admin:pw@new:5984
  sofa restore orders.sofa http://admin:pw@new:5984 --rename orders=orders-copy
  ssh elsewhere 'cat orders.sofa' | sofa restore - http://admin:pw@new:5984/orders`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErr("restore needs ARCHIVE... and TARGET (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := configure(cmd, &c.engine); err != nil {
				return err
			}
			return c.run(cmd.Context(), args[:len(args)-1], args[len(args)-1])
		},
	}
	fs := cmd.Flags()
	c.engine.register(fs)
	// 0 picks per target (restoreWorkers) once the target has answered.
	c.engine.workers = 0
	if f := fs.Lookup("workers"); f != nil {
		f.DefValue = "0"
		f.Usage = fmt.Sprintf("batches in flight at once per database (0: %d into PouchDB Server, %d into others)", pouchDBRestoreWorkers, replicate.DefaultWorkers)
	}
	c.client.register(fs)
	c.control.register(fs)
	registerOutput(fs, &c.out)
	fs.StringArrayVar(&c.include, "include", nil, "restore only databases matching this glob (repeatable; * does not match /)")
	fs.StringArrayVar(&c.exclude, "exclude", nil, "skip databases matching this glob (repeatable; wins over --include)")
	fs.StringArrayVar(&c.renames, "rename", nil, "restore database OLD under the name NEW (OLD=NEW, repeatable)")
	fs.BoolVar(&c.reuseExisting, "reuse-existing", false, "write into existing non-empty target databases (adds revisions; newer ones stay the winners)")
	fs.BoolVar(&c.replace, "replace", false, "DELETE each existing target database (all its documents) and recreate it with the same properties and _security before restoring into it: rolls it back to the archive")
	fs.BoolVar(&c.withReplicator, "with-replicator", false, "also restore _replicator (its documents start replications on the target)")
	fs.IntVar(&c.q, "q", 0, "shards (q) of created databases (0: the target's default)")
	fs.IntVar(&c.n, "n", 0, "replicas (n) of created databases (0: the target's default)")
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	return cmd
}

func (c *restoreCmd) run(ctx context.Context, archives []string, tgtURL string) error {
	if c.replace && c.reuseExisting {
		return usageErr("--replace and --reuse-existing exclude each other: --replace deletes and recreates existing databases, --reuse-existing writes into them")
	}
	renames := map[string]string{}
	for _, r := range c.renames {
		old, nu, ok := strings.Cut(r, "=")
		if !ok || old == "" || nu == "" {
			return usageErr("--rename %q: want OLD=NEW", r)
		}
		renames[old] = nu
	}
	skip := []string{"_replicator"}
	if c.withReplicator {
		skip = nil
	}
	filter := fleet.Filter{Include: c.include, Exclude: c.exclude, Skip: skip}
	if err := filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	fullFrom, err := checkChain(archives)
	if err != nil {
		return err
	}
	copts := c.client.options()
	copts.Log = c.out.logf
	tep, err := openEndpoint(ctx, tgtURL, "TARGET", copts, c.control.newLimiter(hostOf(tgtURL)))
	if err != nil {
		return err
	}
	tgt := tep.Couch()
	if err := c.checkSelection(archives, filter, renames, tgt.DBName != ""); err != nil {
		return err
	}
	c.engine.workers = restoreWorkers(c.engine.workers, tgt.Server.Vendor)
	c.engine.setMemoryLimit(64 << 20)
	sum := fleet.Summary{Started: time.Now()}
	var fatalErr error
	for i, path := range archives {
		if err := c.restoreArchive(ctx, path, i, fullFrom, tgt, filter, renames, &sum); err != nil {
			fatalErr = err
			break
		}
	}
	if len(archives) > 1 {
		mergeChainResults(&sum)
	}
	sum.Duration = fleet.Duration(time.Since(sum.Started))
	if c.out.jsonOut {
		printJSON(os.Stdout, sum)
	} else if !c.out.quiet {
		printFleetSummary(os.Stderr, &sum)
	}
	switch {
	case fatalErr != nil:
		return fatalErr
	case sum.DBsTotal == 0:
		return fatal(errors.New("no database of the archive was selected"))
	case sum.DBsOK != sum.DBsTotal:
		return &exitError{code: exitPartial, err: fmt.Errorf("%d of %d databases were not restored completely (listed above)", sum.DBsTotal-sum.DBsOK, sum.DBsTotal)}
	}
	return nil
}

// pouchDBRestoreWorkers is restore's default --workers into PouchDB
// Server. Its ingest is one Node.js process whose CPU is the limit: more
// _bulk_docs bodies in flight only give it more parsed bodies to hold and
// collect. Measured on PouchDB Server 4.2 (in memory, 2 cores, 100,000
// revisions of 1 KiB): 2 workers took 8-10% less server CPU and 4-8% less
// wall time than 4, and 8 took more than 4; 10,000 revisions were equal.
const pouchDBRestoreWorkers = 2

// restoreWorkers returns the batches in flight per database: n when set
// (> 0), else pouchDBRestoreWorkers for PouchDB Server and
// replicate.DefaultWorkers for every other server.
func restoreWorkers(n int, v couch.Vendor) int {
	switch {
	case n > 0:
		return n
	case v == couch.VendorPouchDB:
		return pouchDBRestoreWorkers
	default:
		return replicate.DefaultWorkers
	}
}

// checkSelection reads the manifests of archive files before anything is
// written: a database URL as target takes exactly one selected database,
// and every --rename must name a database of the archives. (An archive
// read from stdin cannot be looked at twice; it is checked as it goes.)
func (c *restoreCmd) checkSelection(archives []string, filter fleet.Filter, renames map[string]string, oneDB bool) error {
	if len(archives) == 1 && archives[0] == "-" {
		return nil
	}
	selected := map[string]bool{}
	all := map[string]bool{}
	for _, path := range archives {
		f, err := openArchive(path)
		if err != nil {
			return err
		}
		_, dbs, err := archive.List(f)
		f.Close()
		if err != nil {
			return fatal(fmt.Errorf("%s: %w", path, err))
		}
		for _, d := range dbs {
			all[d.Name] = true
			if filter.Match(d.Name) {
				selected[d.Name] = true
			}
		}
	}
	for old := range renames {
		if !all[old] {
			return usageErr("--rename %s=...: the archive holds no database %q", old, old)
		}
	}
	if oneDB && len(selected) != 1 {
		return usageErr("the target is a database URL but %d databases of the archive are selected: restore into a server URL, or select one with --include", len(selected))
	}
	return nil
}

// checkChain reads the headers of archive files and refuses archives that
// do not form a chain (a full archive, then incrementals in order). For a
// chain of several it also reads each manifest and returns, per database,
// the index of the last archive holding a full backup of it: a database
// recreated at the source between two backups is stored in full again,
// and its restore starts there (what earlier archives hold of it belongs
// to the deleted database). A single archive gives a nil map.
func checkChain(archives []string) (map[string]int, error) {
	for _, a := range archives {
		if a == "-" && len(archives) > 1 {
			return nil, usageErr("stdin (-) can only be the one archive of a restore")
		}
	}
	if len(archives) == 1 && archives[0] == "-" {
		return nil, nil
	}
	var headers []archive.Header
	fullFrom := map[string]int{}
	for i, path := range archives {
		f, err := openArchive(path)
		if err != nil {
			return nil, err
		}
		var h archive.Header
		if len(archives) == 1 {
			h, err = archive.ReadHeader(f)
		} else {
			var dbs []archive.DBSummary
			h, dbs, err = archive.List(f)
			for _, d := range dbs {
				if i == 0 || len(d.Since) == 0 {
					fullFrom[d.Name] = i
				}
			}
		}
		f.Close()
		if err != nil {
			return nil, fatal(fmt.Errorf("%s: %w", path, err))
		}
		headers = append(headers, h)
	}
	if err := archive.CheckChain(headers...); err != nil {
		return nil, usageErr("%v", err) // the arguments, not the archives, are wrong
	}
	if len(archives) == 1 {
		return nil, nil
	}
	return fullFrom, nil
}

// restoreArchive restores every selected database of one archive, in
// archive order. A damaged archive stops the restore (fatal): nothing after
// the damage is used, and the database being restored is reported failed.
//
// index is the archive's place in the chain; fullFrom (from checkChain)
// says from which archive each database is restored.
func (c *restoreCmd) restoreArchive(ctx context.Context, path string, index int, fullFrom map[string]int, tgt *couch.Endpoint, filter fleet.Filter, renames map[string]string, sum *fleet.Summary) error {
	f, err := openArchive(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Attachment bytes kept for later references count against the
	// in-flight budget: a quarter of it, at most the archive default.
	blobMem := min(archive.DefaultBlobMemory, max(c.engine.maxInflight/4, 1))
	rd, err := archive.NewReader(f, &archive.ReaderOptions{BlobMemory: blobMem})
	if err != nil {
		return fatal(fmt.Errorf("%s: %w", path, err))
	}
	defer rd.Close()
	picked := 0
	for {
		dbr, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fatal(fmt.Errorf("%s: %w", path, err))
		}
		if !filter.Match(dbr.Name()) {
			continue
		}
		if from, ok := fullFrom[dbr.Name()]; ok && index < from {
			continue // recreated at the source later in the chain
		}
		incremental := index > 0 && len(dbr.Since()) > 0
		picked++
		name := dbr.Name()
		if nu, ok := renames[name]; ok {
			name = nu
		}
		if tgt.DBName != "" {
			if picked > 1 {
				return usageErr("%s holds several databases: restore into a server URL, or select one with --include", path)
			}
			name = tgt.DBName
		}
		t0 := time.Now()
		r, err := c.restoreDB(ctx, dbr, tgt.Server.DB(name), incremental)
		r.Duration = fleet.Duration(time.Since(t0))
		addResult(sum, r, err)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return &exitError{code: exitInterrupted, err: errors.New("interrupted: checkpoints written; run the same command again to resume")}
			}
			var ae *archive.Error
			if errors.As(err, &ae) {
				return fatal(fmt.Errorf("%s: %w", path, err))
			}
		}
	}
}

func (c *restoreCmd) restoreDB(ctx context.Context, dbr *archive.DBReader, tdb *couch.DB, incremental bool) (fleet.DBResult, error) {
	r := fleet.DBResult{Name: tdb.Name()}
	meta, err := dbr.Metadata(ctx)
	if err != nil {
		return r, err
	}
	reused, err := c.prepareTarget(ctx, dbr, tdb, meta, incremental)
	if err != nil {
		return r, err
	}
	var src replicate.Source = dbr
	var winners *winnerLog
	if reused && !incremental {
		// The target held documents before: note the archive's winning
		// revisions to tell afterwards which documents were not rolled back.
		if winners, err = newWinnerLog(dbr); err != nil {
			return r, err
		}
		defer winners.Close()
		src = winners
	}
	target := &restoreTarget{DesignLast: replicate.NewDesignLast(tdb)}
	opts := c.engine.options()
	opts.CopyMetadata = true
	opts.SourceReadOnly = true // an archive takes no checkpoint
	opts.Counters = &replicate.Counters{}
	var warnMu sync.Mutex
	warn := func(s string) {
		c.out.logf("%s: %s", tdb.Name(), s)
		warnMu.Lock()
		r.Warnings = append(r.Warnings, s)
		warnMu.Unlock()
	}
	opts.Warn = warn
	opts.Debug = c.out.debugf(tdb.Name())
	if tdb.Fresh {
		opts.TargetCreated = tdb.Created()
	}
	c.out.logf("restoring %s", tdb.Name())
	res, err := replicate.Run(ctx, src, target, opts)
	dbcopy.FillResult(&r, res)
	if err != nil {
		return r, err
	}
	fails, err := target.Finish(ctx)
	if res != nil && len(fails) > 0 {
		r.Failures = append(r.Failures, fails...)
		r.DocWriteFailures += int64(len(fails))
		r.DocsWritten -= int64(len(fails))
	}
	if err != nil {
		return r, err
	}
	if err := target.setSecurity(ctx); errors.Is(err, replicate.ErrMetadataRefused) {
		warn(err.Error())
	} else if err != nil {
		return r, fmt.Errorf("target: %w", err)
	}
	if s, ok := dbr.Summary(); ok && s.Error != "" {
		return r, fmt.Errorf("the backup of this database failed part way: %s", s.Error)
	}
	if winners != nil {
		failed := map[string]bool{}
		for _, f := range r.Failures {
			failed[f.ID] = true
		}
		kept, total, err := winners.notWinning(ctx, tdb, failed)
		if err != nil {
			return r, fmt.Errorf("target: compare winning revisions: %w", err)
		}
		if kept > 0 {
			warn(fmt.Sprintf("not rolled back: %d of %d documents of the archive have a winning revision on the target that is not the archive's (the archive's revision was already there or lost to a newer one); --replace restores the archive's state", kept, total))
		}
	}
	return r, nil
}

// prepareTarget creates the target database with the archive's
// properties, or checks that an existing one may be written: empty, the
// server's own _users or _replicator, an incremental archive continuing
// an earlier one, --reuse-existing, or a database this same restore
// claimed (a killed restore resumes). The claim, a `_local` document
// written before any document, lets a rerun tell its own half-restored
// database from someone else's: a checkpoint alone cannot, since design
// documents are held back and the checkpoints with them. With --replace
// an existing database (but _users and _replicator) of a full archive is
// deleted and recreated first.
//
// reused reports that the database held documents before this restore.
func (c *restoreCmd) prepareTarget(ctx context.Context, dbr *archive.DBReader, tdb *couch.DB, meta replicate.Metadata, incremental bool) (reused bool, err error) {
	sinfo, err := dbr.Info(ctx)
	if err != nil {
		return false, err
	}
	tinfo, err := tdb.Info(ctx)
	if err == nil && c.replace && !incremental && !systemDB(tdb.Name()) {
		if err := c.recreate(ctx, tdb); err != nil {
			return false, err
		}
		return false, dbcopy.ClaimNew(ctx, sinfo, tdb)
	}
	if errors.Is(err, replicate.ErrNotFound) {
		err := tdb.Server().CreateDB(ctx, tdb.Name(), couch.CreateOptions{Partitioned: meta.Partitioned, Q: c.q, N: c.n})
		if errors.Is(err, couch.ErrExists) {
			return false, dbcopy.ClaimTarget(ctx, sinfo, tdb) // created meanwhile
		}
		if err != nil {
			return false, fmt.Errorf("target: %w", err)
		}
		tdb.Fresh = true
		return false, dbcopy.ClaimNew(ctx, sinfo, tdb)
	}
	if err != nil {
		return false, fmt.Errorf("target: %w", err)
	}
	reused = tinfo.DocCount+tinfo.DelCount > 0
	if c.reuseExisting || incremental || systemDB(tdb.Name()) {
		return reused, nil
	}
	if !reused {
		return false, dbcopy.ClaimTarget(ctx, sinfo, tdb)
	}
	id := replicate.ReplicationID(sinfo.Identity, tinfo.Identity)
	if _, err := tdb.GetLocal(ctx, "_local/"+id); err == nil || dbcopy.Claimed(ctx, sinfo, tdb) {
		return true, nil // this restore's own earlier run: resume
	}
	return true, dbcopy.ErrNotEmpty
}

// systemDB reports whether name is _users or _replicator, which a restore
// writes into (never deletes, never refuses): the server created them and
// uses them.
func systemDB(name string) bool { return name == "_users" || name == "_replicator" }

// recreate deletes tdb and creates it again with its partitioned flag, q
// and n (--q/--n win) and puts its _security back at once, so the new
// database is never more open than the old one was.
func (c *restoreCmd) recreate(ctx context.Context, tdb *couch.DB) error {
	old, err := tdb.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	q, n, err := tdb.Shards(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if c.q > 0 {
		q = c.q
	}
	if c.n > 0 {
		n = c.n
	}
	c.out.logf("%s: --replace: deleting the database and creating it again", tdb.Name())
	srv := tdb.Server()
	if err := srv.DeleteDB(ctx, tdb.Name()); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if err := srv.CreateDB(ctx, tdb.Name(), couch.CreateOptions{Partitioned: old.Partitioned, Q: q, N: n}); err != nil {
		return fmt.Errorf("target: recreate after delete: %w", err)
	}
	if sec := bytes.TrimSpace(old.Security); len(sec) > 0 && !bytes.Equal(sec, []byte("{}")) {
		if err := tdb.SetMetadata(ctx, replicate.Metadata{Security: sec}, replicate.AfterDocs); err != nil {
			return fmt.Errorf("target: put _security back: %w", err)
		}
	}
	return nil
}

// winnerLog is the archive source of a restore into a database that held
// documents: it notes, in a temporary file, the archive's winning revision
// of every document as the changes pass, so that afterwards the target's
// winners can be compared without holding every id in memory.
type winnerLog struct {
	*archive.DBReader
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

func newWinnerLog(dbr *archive.DBReader) (*winnerLog, error) {
	f, err := os.CreateTemp("", "sofa-restore-winners-*")
	if err != nil {
		return nil, fmt.Errorf("temporary file: %w", err)
	}
	w := bufio.NewWriter(f)
	return &winnerLog{DBReader: dbr, f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Changes passes the archive's changes after since on, noting the winner
// of every document of the archive, those before since included (a rerun
// resuming from a checkpoint still compares every document). The leaves
// of one document may come in two Changes (a chunk boundary): a document
// is noted once its last one has passed.
func (l *winnerLog) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	var after int64
	if s := since.String(); s != "" && s != "0" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("archive: since %q is not a seq of this archive", s)
		}
		after = n
	}
	var id string
	var best *replicate.Doc
	note := func() {
		if best != nil && l.err == nil {
			l.err = l.enc.Encode([2]string{id, best.Rev})
		}
		best = nil
	}
	err := l.DBReader.Changes(ctx, nil, func(ch replicate.Change) error {
		if ch.ID != id {
			note()
			id = ch.ID
		}
		for _, d := range ch.Docs {
			if best == nil || wins(d, best) {
				best = d
			}
		}
		if n, err := strconv.ParseInt(ch.Seq.String(), 10, 64); err == nil && n <= after {
			return nil // copied by an earlier run
		}
		return fn(ch)
	})
	note()
	return err
}

// notWinning reads the noted winners back in batches and asks the target
// for its winners: kept counts the documents whose winner on the target
// is not the archive's (ids in skip, already reported failed, aside),
// total the documents compared.
func (l *winnerLog) notWinning(ctx context.Context, tdb *couch.DB, skip map[string]bool) (kept, total int64, err error) {
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		return 0, 0, fmt.Errorf("temporary file: %w", l.err)
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("temporary file: %w", err)
	}
	dec := json.NewDecoder(bufio.NewReader(l.f))
	const batch = 500
	want := make(map[string]string, batch)
	check := func() error {
		if len(want) == 0 {
			return nil
		}
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		got, err := tdb.Winners(ctx, ids)
		if err != nil {
			return err
		}
		for id, rev := range want {
			total++
			if got[id] != rev {
				kept++
			}
		}
		clear(want)
		return nil
	}
	for {
		var e [2]string
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return 0, 0, fmt.Errorf("temporary file: %w", err)
		}
		if skip[e[0]] {
			continue
		}
		want[e[0]] = e[1] // a document seen twice (resume) keeps its last winner
		if len(want) >= batch {
			if err := check(); err != nil {
				return 0, 0, err
			}
		}
	}
	return kept, total, check()
}

// Close removes the temporary file.
func (l *winnerLog) Close() {
	l.f.Close()
	os.Remove(l.f.Name())
}

// wins reports whether leaf a beats leaf b by CouchDB's rule for the
// winning revision: a live leaf beats a deleted one, then the longer
// history (higher generation), then the greater revision id.
func wins(a, b *replicate.Doc) bool {
	if a.Deleted != b.Deleted {
		return !a.Deleted
	}
	ga, ia := splitRev(a.Rev)
	gb, ib := splitRev(b.Rev)
	if ga != gb {
		return ga > gb
	}
	return ia > ib
}

// splitRev splits "N-hash" into N and hash (0 and rev when malformed).
func splitRev(rev string) (int, string) {
	n, id, ok := strings.Cut(rev, "-")
	if !ok {
		return 0, rev
	}
	gen, err := strconv.Atoi(n)
	if err != nil {
		return 0, rev
	}
	return gen, id
}

// restoreTarget holds design documents back (DesignLast) and `_security`
// too: the engine sets it once the other documents are written, but a
// restore sets it last, after the design documents (setSecurity).
type restoreTarget struct {
	*replicate.DesignLast
	after *replicate.Metadata
}

// SetMetadata applies the BeforeDocs phase (_revs_limit, properties) at
// once and keeps the AfterDocs one for setSecurity.
func (t *restoreTarget) SetMetadata(ctx context.Context, m replicate.Metadata, phase replicate.MetadataPhase) error {
	if phase == replicate.AfterDocs {
		t.after = &m
		return nil
	}
	return t.DesignLast.SetMetadata(ctx, m, phase)
}

// setSecurity applies the kept AfterDocs metadata; call it after Finish.
func (t *restoreTarget) setSecurity(ctx context.Context) error {
	if t.after == nil {
		return nil
	}
	return t.DesignLast.SetMetadata(ctx, *t.after, replicate.AfterDocs)
}

// mergeChainResults folds the results of a chain's archives into one per
// database (counters summed, failures and warnings kept, the worst status)
// and recounts the summary, so that a database restored from three
// archives counts once.
func mergeChainResults(s *fleet.Summary) {
	var order []string
	byName := map[string]*fleet.DBResult{}
	for _, r := range s.DBs {
		if m, ok := byName[r.Name]; ok {
			m.Merge(r)
			continue
		}
		r := r
		byName[r.Name] = &r
		order = append(order, r.Name)
	}
	merged := fleet.Summary{Started: s.Started, Interrupted: s.Interrupted}
	for _, name := range order {
		merged.Add(*byName[name])
	}
	*s = merged
}

// addResult counts one database's outcome into a summary.
func addResult(s *fleet.Summary, r fleet.DBResult, err error) {
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		r.Status = fleet.StatusInterrupted
		s.Interrupted = true
	case err != nil:
		r.Status, r.Error = fleet.StatusFailed, err.Error()
	case len(r.Failures) > 0 || r.DocWriteFailures > 0:
		r.Status = fleet.StatusPartial
	default:
		r.Status = fleet.StatusOK
	}
	s.Add(r)
}
