package sofa

import (
	"context"

	"github.com/sofadb/sofa/storage"
)

// backupArchive is Backup from the archive src into the archive dst: a
// copy of a full archive (a file, "-" read in order, or s3://) into a new
// full archive, through the restore of a chain of one into an archive
// (RestorePlan.runIntoArchive): the selected databases (Selection, Skip
// BackupSkip when nil; _replicator and _users included) each copied into
// a group of dst, the header's Source that of src, each group ending at
// the seq and checkpoints src recorded (an incremental backup of the
// server may continue dst as it would src). A database not whole in src
// stays marked not whole in dst and fails in the Summary. Refused with an
// *OptionError: a target that is not an archive, the same archive, an
// incremental src (its chain is consolidated by a restore into an
// archive), Since, and Selection.Shard.
func backupArchive(ctx context.Context, src, dst *Endpoint, o BackupOptions) (*Summary, error) {
	if dst.Kind() != KindArchive {
		return nil, optionErr("backup: %s is an archive: from an archive the target is a new archive (to restore it into %s: sofa restore %s %s)", src, dst, src, dst)
	}
	if err := CheckDistinct(src, dst); err != nil {
		return nil, err
	}
	switch {
	case o.Since != "":
		return nil, optionErr("--since %s: a backup from an archive copies the archive whole (no incremental of an archive); an incremental backup of the server may continue the new archive (--since %s)", Redact(o.Since), dst)
	case o.Selection.Shard.Sharded():
		return nil, optionErr("--shard %s: a sharded backup reads a server, not the archive %s", o.Selection.Shard, src)
	}
	if src.archive != storage.Stdio {
		h, err := readHeader(ctx, src)
		if err != nil {
			return nil, err
		}
		if h.Since != nil {
			return nil, optionErr("backup: %s is an incremental archive (it continues archive %s): copy its chain into one full archive with sofa restore FULL.sofa ... %s %s", src, h.Since.ArchiveID, src, dst)
		}
	}
	if o.Selection.Skip == nil {
		o.Selection.Skip = BackupSkip
	}
	if err := o.Selection.Validate(); err != nil {
		return nil, err
	}
	p, err := PlanRestore(ctx, []*Endpoint{src}, RestoreOptions{
		Engine: o.Engine, Selection: o.Selection, WithReplicator: true,
		Output:     ArchiveOutput{Compression: o.Compression, ArchiveVersion: o.ArchiveVersion, Overwrite: o.Overwrite, Tool: o.Tool, TempDir: o.TempDir},
		RunControl: o.RunControl,
	})
	if err != nil {
		return nil, err
	}
	p.verb = "backup"
	return p.runIntoArchive(ctx, dst)
}
