package archive

import (
	"hash/maphash"
)

// A source's feed may send a revision again: when a node of a CouchDB
// cluster is lost, the changes of its shard ranges are replayed from
// another copy, and a backup reading through another node gets them a
// second time (measured on a 3-node cluster: 16,453 records stored for
// 10,431 revisions). A group stores each revision once: WriteDocs skips a
// revision the group already holds, known by a 128-bit key of its id and
// rev. The keys of the archive's open groups are bounded by
// maxReplayKeys (about 16 bytes each, a few MB in all): beyond it, a
// group's later revisions are not remembered, and a replay of them is
// stored again, as it was before (a restore writes it once).
var maxReplayKeys int64 = 1 << 18

// revKey identifies a revision within an archive: two 64-bit hashes of
// its id and rev under the writer's random seeds.
type revKey [2]uint64

func (w *Writer) revKey(id, rev string) revKey {
	var k revKey
	var h maphash.Hash
	for i := range k {
		h.SetSeed(w.keySeeds[i])
		h.WriteString(id)
		h.WriteByte(0)
		h.WriteString(rev)
		k[i] = h.Sum64()
	}
	return k
}

// storedLocked reports whether the group holds revision k (d.mu held).
func (d *DBWriter) storedLocked(k revKey) bool {
	_, ok := d.revs[k]
	return ok
}

// rememberLocked records that the group holds revision k (d.mu held),
// while the archive's budget of keys lasts.
func (d *DBWriter) rememberLocked(k revKey) {
	if d.w.replayKeys.Add(-1) < 0 {
		d.w.replayKeys.Add(1)
		return
	}
	if d.revs == nil {
		d.revs = map[revKey]struct{}{}
	}
	d.revs[k] = struct{}{}
}

// forgetRevsLocked gives the group's keys back to the archive's budget
// once the group is complete (d.mu held).
func (d *DBWriter) forgetRevsLocked() {
	d.w.replayKeys.Add(int64(len(d.revs)))
	d.revs = nil
}
