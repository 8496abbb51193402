package sofa

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

// BackupSkip are the databases a backup leaves out unless
// Selection.Include names them.
var BackupSkip = fleet.BackupSkip

// BackupOptions configure Backup.
type BackupOptions struct {
	// Engine are the one-database engine's options (see CopyOptions).
	Engine replicate.Options
	// Selection picks the source's databases (Skip: BackupSkip when nil);
	// a database endpoint is its one database, an archive the databases
	// it holds. With Selection.Shard i/n (a server source only) the archive is the member
	// ShardArchiveName(dst, i/n) of a set, and the set manifest
	// SetManifestName(dst) is written (over the same one of the other
	// workers) once the member is committed; an empty shard writes an
	// archive without databases.
	Selection Selection
	// SetID names the run of a sharded backup: recorded in the manifest
	// and in every member, so that a restore refuses a member another run
	// left ("": none, members are told apart by n and index only). Give
	// every worker of one run the same (a Kubernetes Job's name).
	SetID string
	// Since names the previous archive of the chain, in the target's
	// store (or a local file when the target is s3://): only what
	// changed after it is stored. "": a full backup. A server or
	// database source only (an archive source refuses it). With
	// Selection.Shard i/n it names the member of shard i of an earlier
	// set of n, or that set (its manifest or ARCHIVE name: member i is
	// taken); the member written continues it (see ChainSets).
	Since string
	// Compression of archive members ("": zstd).
	Compression archive.Compression
	// ArchiveVersion is the archive format version written: 0 means
	// archive.FormatVersion (3, which packs each database's small members);
	// 2 writes the layout that sofa releases before version 3 read.
	ArchiveVersion int
	// Overwrite replaces an existing archive (or an empty file); any other
	// file or object under the name is refused with an *OptionError.
	Overwrite bool
	// Tool is recorded in the archive's header ("sofa 1.2.3").
	Tool string
	// TempDir holds spool files while the archive is written; "": next
	// to a local archive file, else the system's.
	TempDir string
	// RunControl: databases at once, progress and logs.
	RunControl
}

// Backup copies every selected database of src (a server or database)
// into the archive dst through the engine, the archive's database writer
// being the target: every leaf revision with its history, attachments
// once each, `_security`, `_revs_limit` and properties. The source is
// never written. A database whose group holds fewer leaf revisions than
// the documents the source counted before its backup is not whole
// either (a check without a request: the writer counts what it stored).
// The archive is committed (visible under its name) only
// when the run finished; an interrupted backup (the error matches
// ctx.Err()) leaves none, and its Summary says so (ArchiveNotWritten: no
// database ok, DocsWritten 0, the databases read whole counted in
// DBsNotWritten, what was read in DocsRead and Bytes). A database not backed up whole is marked so in
// the archive and not ok in the Summary. An incremental backup names in
// Summary.DeletedSincePrevious the databases of the previous archive
// (Since) deleted at the source since: it does not hold them, and a
// restore of the chain does not restore them. When the archive itself could
// not be written (a full disk, a closed stdout: EPIPE) the Summary is nil
// and the error says why.
//
// src may also be a full archive (a file, "-", s3://): its selected
// databases are copied into the new archive dst, which records src's
// Source and, per database, the seq and checkpoints src recorded, so an
// incremental backup of the server may continue dst (--since dst). A
// database not whole in src stays marked not whole. With an archive src,
// Since, Selection.Shard, an incremental src (consolidate its chain with
// a restore into an archive: RestorePlan.Run) and the same archive as
// dst are refused with an *OptionError.
func Backup(ctx context.Context, src, dst *Endpoint, o BackupOptions) (*Summary, error) {
	if err := opened(src, dst); err != nil {
		return nil, err
	}
	if err := o.checkLocal(); err != nil {
		return nil, err
	}
	if src.Kind() == KindArchive {
		return backupArchive(ctx, src, dst, o)
	}
	if dst.Kind() != KindArchive {
		return nil, optionErr("backup: %s to %s: want a server, database or archive and an archive", src, dst)
	}
	if o.Selection.Skip == nil {
		o.Selection.Skip = BackupSkip
	}
	if err := o.Selection.Validate(); err != nil {
		return nil, err
	}
	name := dst.archive
	var shard *archive.Shard
	if sh := o.Selection.Shard; sh.Sharded() {
		switch {
		case name == storage.Stdio:
			return nil, optionErr("--shard %s: a sharded backup writes a set of archives: give an ARCHIVE name, not -", sh)
		case src.Kind() != KindServer:
			return nil, optionErr("--shard %s: %s is a database; a sharded backup needs a server URL", sh, src)
		case strings.HasSuffix(name, ".set.json"):
			return nil, optionErr("--shard %s: give the ARCHIVE name (backup.sofa), not the set manifest's", sh)
		}
		if !o.Overwrite {
			if err := checkSetManifest(ctx, dst.store, name, sh.Count, o.SetID); err != nil {
				return nil, err
			}
		}
		if err := notBoth(ctx, dst.store, name, name); err != nil {
			return nil, err
		}
		name = ShardArchiveName(name, sh)
		shard = &archive.Shard{Index: sh.Index, Count: sh.Count, SetID: o.SetID}
	} else if name != storage.Stdio && !strings.HasSuffix(name, ".set.json") {
		if err := notBoth(ctx, dst.store, SetManifestName(name), name); err != nil {
			return nil, err
		}
	}
	// before "exists (use --force)", which --force would only lead to
	if o.Since != "" && !o.Selection.Shard.Sharded() {
		if err := sinceNotOutput(o.Since, dst.store, name, dst.store); err != nil {
			return nil, err
		}
	}
	// The archive's name is checked (and its temporary file created)
	// before the source is read: a name that cannot be written fails at
	// once, not after the whole backup.
	sink, err := dst.store.Create(ctx, name, storage.CreateOptions{Overwrite: o.Overwrite, OnStale: func(p string) {
		o.logf("removed %s (left by a killed backup)", p)
	}})
	if err != nil {
		return nil, nameErr(err)
	}
	committed := false
	defer func() {
		if !committed {
			sink.Abort()
		}
	}()
	if err := checkReplaceable(ctx, dst.store, name, o.Overwrite); err != nil {
		return nil, err
	}
	srv := src.couch.Server
	source := srv.UUID
	if source == "" {
		source = srv.URL()
	}
	var since *archive.Since
	var held []string // the databases the previous archive holds
	if o.Since != "" {
		sinceStore := dst.store
		if _, s3dst := dst.store.(*s3.Store); s3dst != strings.HasPrefix(o.Since, s3.Scheme) {
			if !s3dst {
				return nil, optionErr("--since %s: an s3:// previous archive needs an s3:// archive to write", Redact(o.Since))
			}
			sinceStore = storage.Local{} // a local previous archive, an s3:// new one
		}
		prev, err := o.previous(ctx, sinceStore)
		if err != nil {
			return nil, err
		}
		if err := sinceNotOutput(prev, sinceStore, name, dst.store); err != nil {
			return nil, err
		}
		if since, held, err = readSince(ctx, sinceStore, prev, o.logf); err != nil {
			return nil, fmt.Errorf("--since %s: %w", prev, err)
		}
		if since.Source != "" && since.Source != source {
			return nil, optionErr("--since %s: that archive is a backup of another server (%s), not of %s (%s); take a full backup (without --since)", o.Since, since.Source, srv.URL(), source)
		}
	}
	dbs, skipped, err := selectDBs(ctx, src, o.Selection, "source")
	if err != nil {
		return nil, err
	}
	var deleted []string
	if since != nil {
		if deleted, err = sinceLeavesOut(ctx, src, o.Since, since, held, dbs); err != nil {
			return nil, err
		}
	}
	tempDir := o.TempDir
	if _, local := dst.store.(storage.Local); tempDir == "" && local && name != storage.Stdio {
		tempDir = filepath.Dir(name)
	}
	w, err := archive.NewWriter(sink, archive.Options{Compression: o.Compression, Version: o.ArchiveVersion, Tool: o.Tool, Source: source, Since: since, Shard: shard, TempDir: tempDir,
		SpoolAhead: spoolAhead(dst.store)})
	if err != nil {
		sink.Abort()
		return nil, fmt.Errorf("write archive: %w", err)
	}
	sum, runErr := o.runDBs(ctx, dbs, o.job(srv, w, listTarget(ctx, w, &o.RunControl)).fleetJob(), NewStallWatch(src, dst).Waiting, false, src)
	sum.LeftOut = append(skipped, sum.LeftOut...)
	sum.DeletedSincePrevious = deleted
	if sum.Interrupted || runErr != nil {
		sink.Abort()
		sum.NotWritten()
		if runErr == nil {
			runErr = context.Canceled
		}
		return &sum, fmt.Errorf("backup: %w", runErr)
	}
	// An archive that could not be written whole (a full disk, a closed
	// stdout) has no summary: no database was backed up.
	if err := w.Close(); err != nil {
		sink.Abort()
		return nil, fmt.Errorf("write archive: %w", err)
	}
	committed = true // Commit removes what it leaves on failure
	if err := sink.Commit(); err != nil {
		return nil, commitErr(name, err)
	}
	if shard != nil {
		if err := writeSetManifest(ctx, dst.store, dst.archive, shard.Count, o.SetID); err != nil {
			return &sum, fmt.Errorf("backup: %w", err)
		}
	}
	return &sum, nil
}

// spoolAhead is archive.Options.SpoolAhead for a backup into st. An
// object store's upload takes the stream at a few connections' speed: the
// databases waiting for their turn may read ahead what the upload holds
// in flight (part size x transfers), and then wait, so that the stream's
// owner gets the source's whole read rate and the upload runs while the
// source is read (not, for most of the archive, after it: the spools
// left when the source is read are at most one more round of the
// upload). A local file copies a spool at disk speed: no bound.
func spoolAhead(st storage.Store) int64 {
	n, part := storage.Parallelism(st)
	return part * int64(n)
}

// previous is the archive an incremental backup continues: o.Since, or
// for a sharded backup the member of its shard of the set o.Since names
// (see shardSince). A backup that is not sharded refuses a set or a
// member of one (an *OptionError).
func (o *BackupOptions) previous(ctx context.Context, st storage.Store) (string, error) {
	if sh := o.Selection.Shard; sh.Sharded() {
		return shardSince(ctx, st, o.Since, sh)
	}
	if o.Since == storage.Stdio {
		return o.Since, nil
	}
	ep := &Endpoint{location: Redact(o.Since), archive: o.Since, store: st}
	if IsSet(ctx, ep) {
		return "", optionErr("--since %s is the set of a sharded backup: continue it with sharded backups of the same n (--shard i/n), each given the set", Redact(o.Since))
	}
	if h, err := readHeader(ctx, ep); err == nil && h.Shard != nil {
		return "", optionErr("--since %s is shard %d/%d of a sharded backup: continue it with --shard %d/%d (or take a full backup)", Redact(o.Since), h.Shard.Index, h.Shard.Count, h.Shard.Index, h.Shard.Count)
	}
	return o.Since, nil
}

// readSince reads the seqs an incremental backup continues from, after
// checking the whole previous archive as `sofa verify ARCHIVE` does
// (every member's checksums, records, attachment references and the
// manifest): a chain built on a damaged archive would only fail at
// restore. held are the databases the archive itself holds (not those
// its own Since carries forward). The check reads the archive once more; from stdin, which can be
// read only once, it is skipped and logf says so.
func readSince(ctx context.Context, st storage.Store, name string, logf func(string, ...any)) (*archive.Since, []string, error) {
	if name != storage.Stdio {
		r, err := st.Open(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		_, err = archive.Verify(r, nil)
		r.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("the previous archive is damaged (the chain would not restore): %w", err)
		}
	} else {
		logf("--since -: the previous archive's members were not verified (stdin is read once); run sofa verify on it")
	}
	r, err := st.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	return archive.ReadSinceHeld(r)
}

// job maps the options onto the per-database job from the server srv
// into the archive w: the source is never written (checkpoints go into
// the archive's manifest, for the next incremental backup), each
// database's group is written with `_revs_limit` and `_security`, and
// its leaf revisions are counted against the source's doc counts. A group
// not backed up whole is marked so (aborted with the reason).
func (o *BackupOptions) job(srv *couch.Server, w *archive.Writer, onTarget *targetListing) *pairJob {
	engine := o.Engine
	engine.CopyMetadata = true
	return &pairJob{src: srv, tgt: w, engine: engine, budget: replicate.NewBudget(o.Engine.MaxInflightBytes),
		verify: VerifyCheap, sourceReadOnly: true, warnLogOnly: true, onTarget: onTarget, rc: &o.RunControl, batchInfo: true}
}

// ErrWrittenMeanwhile: the archive's name was taken, by another run, while
// this one wrote it: this run's archive was discarded (nothing was
// overwritten; the work is lost). Not a usage error: the name was free
// when the run began.
var ErrWrittenMeanwhile = errors.New("was written by another run while this one ran: this run's archive is discarded (nothing was overwritten)")

// commitErr is the error of committing the archive name: a name that
// appeared since the run began is ErrWrittenMeanwhile, not
// storage.ErrExist (which says the name was taken before anything was
// done).
func commitErr(name string, err error) error {
	if errors.Is(err, storage.ErrExist) {
		return fmt.Errorf("%s %w", Redact(name), ErrWrittenMeanwhile)
	}
	return err
}

// sinceNotOutput refuses, with an *OptionError, an incremental backup
// written over the archive it continues (prev in prevStore, the output
// name in st): it would cut the chain.
func sinceNotOutput(prev string, prevStore storage.Store, name string, st storage.Store) error {
	if prev == storage.Stdio || !sameArchive(&Endpoint{archive: prev, store: prevStore}, &Endpoint{archive: name, store: st}) {
		return nil
	}
	return optionErr("--since %s is the archive this backup writes: replacing it would cut the chain (the archives after it continue it, and its changes would be lost); write the incremental under a new name", Redact(prev))
}
