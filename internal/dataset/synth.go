package dataset

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Synth describes a deterministic synthetic database: the same Synth always
// yields the same revisions, byte for byte.
type Synth struct {
	Name string // database name
	Docs int    // number of documents
	// MinSize and MaxSize bound the size in bytes of each leaf's JSON body
	// (envelope and attachments excluded); sizes are spread evenly between
	// them. MaxSize <= MinSize means every body is MinSize bytes. Bodies
	// are never smaller than about 60 bytes.
	MinSize, MaxSize int
	// Atts lists the sizes in bytes of the attachments every live document
	// carries ("a0.bin", "a1.bin", ...; application/octet-stream; random,
	// incompressible bytes).
	Atts []int
	// Depth is the number of revisions in each document's history, leaf
	// included; 0 means 1.
	Depth int
	// ConflictEvery gives every k-th document (k = ConflictEvery, counting
	// from 0) Conflicts extra leaf revisions branching off its parent
	// revision; 0 means no conflicts. Conflicts 0 means 1.
	ConflictEvery, Conflicts int
	// DeleteEvery turns every k-th document (counting from 1) into a
	// tombstone: its winning branch ends with a deleted revision one
	// generation after Depth. 0 means no tombstones.
	DeleteEvery int
	// Seed varies the content; two Synths differing only in Seed yield
	// different bytes and revision ids.
	Seed uint64
}

// Revs returns the number of revisions DB().Each yields.
func (s Synth) Revs() int {
	n := s.Docs
	if s.ConflictEvery > 0 {
		n += ((s.Docs + s.ConflictEvery - 1) / s.ConflictEvery) * s.conflicts()
	}
	return n
}

func (s Synth) depth() int     { return max(s.Depth, 1) }
func (s Synth) conflicts() int { return max(s.Conflicts, 1) }

// DB returns the database described by s.
func (s Synth) DB() DB {
	return DB{Name: s.Name, Revs: s.Revs(), Each: s.each}
}

func (s Synth) each(yield func([]byte) error) error {
	for i := range s.Docs {
		id := fmt.Sprintf("doc-%08d", i)
		depth := s.depth()
		hashes := make([]string, 0, depth+1)
		for g := depth; g >= 1; g-- {
			hashes = append(hashes, s.hash(id, g, 0))
		}
		leaf := revision{ID: id, Gen: depth, Hashes: hashes}
		if s.DeleteEvery > 0 && (i+1)%s.DeleteEvery == 0 {
			leaf.Gen = depth + 1
			leaf.Hashes = append([]string{s.hash(id, depth+1, 0)}, hashes...)
			leaf.Deleted = true
		} else {
			leaf.Body = s.body(i, 0)
			for j, size := range s.Atts {
				leaf.Atts = append(leaf.Atts, att{
					Name:        "a" + strconv.Itoa(j) + ".bin",
					ContentType: "application/octet-stream",
					Data:        s.bytes(i, j, size),
				})
			}
		}
		if err := emit(yield, &leaf); err != nil {
			return err
		}
		if s.ConflictEvery > 0 && i%s.ConflictEvery == 0 {
			for b := 1; b <= s.conflicts(); b++ {
				c := revision{ID: id, Gen: depth, Body: s.body(i, b)}
				c.Hashes = append([]string{s.hash(id, depth, b)}, hashes[1:]...)
				if err := emit(yield, &c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func emit(yield func([]byte) error, r *revision) error {
	doc, err := r.encode()
	if err != nil {
		return err
	}
	return yield(doc)
}

func (s Synth) hash(id string, gen, branch int) string {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], s.Seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(gen))
	binary.LittleEndian.PutUint64(b[16:], uint64(branch))
	return revHash([]byte(s.Name), []byte(id), b[:])
}

func (s Synth) rng(i, stream int) *rand.Rand {
	return rand.New(rand.NewPCG(s.Seed^uint64(i)*0x9e3779b97f4a7c15, uint64(stream)+1))
}

// size returns the body size of document i.
func (s Synth) size(i int) int {
	if s.MaxSize <= s.MinSize || s.Docs <= 1 {
		return s.MinSize
	}
	return s.MinSize + (s.MaxSize-s.MinSize)*i/(s.Docs-1)
}

var words = []string{
	"couch", "sofa", "replica", "leaf", "branch", "seq", "checkpoint", "batch",
	"river", "mountain", "city", "harbour", "lantern", "copper", "meadow",
	"window", "orbit", "signal", "garden", "thunder", "pebble", "willow",
	"quartz", "falcon", "ember", "glacier", "velvet", "canyon", "spruce", "tide",
}

// body renders the JSON body of document i on branch b, about size(i) bytes.
func (s Synth) body(i, b int) []byte {
	r := s.rng(i, 1000+b)
	buf := fmt.Appendf(nil, `{"type":"synthetic","n":%d,"branch":%d,"score":%d,"tags":["%s","%s"],"text":"`,
		i, b, r.IntN(1_000_000), words[r.IntN(len(words))], words[r.IntN(len(words))])
	want := s.size(i) - 2 // closing `"}`
	for len(buf) < want {
		w := words[r.IntN(len(words))]
		if len(buf)+len(w)+1 > want {
			w = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"[:min(40, max(want-len(buf), 0))]
			buf = append(buf, w...)
			continue
		}
		buf = append(buf, w...)
		buf = append(buf, ' ')
	}
	return append(buf, `"}`...)
}

// bytes returns n pseudo-random bytes for attachment j of document i.
func (s Synth) bytes(i, j, n int) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[0:], s.Seed)
	binary.LittleEndian.PutUint64(seed[8:], uint64(i))
	binary.LittleEndian.PutUint64(seed[16:], uint64(j))
	copy(seed[24:], s.Name)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(seed).Read(b) // never fails
	return b
}

// Preset names accepted by [Preset].
const (
	PresetNoAtts     = "no_atts_db" // 79,743 docs of 500 B–3 KB, no attachments
	PresetAtts       = "atts_db"    // 110 docs of 1–2 KB with attachments of 30 B, 41 KB and 2 MB
	PresetLarge614   = "large_6_14" // 93,750 docs of 6–14 KB
	PresetLarge1KB   = "large1kb"   // 341,298 docs of about 1 KB
	PresetRevTree    = "revtree"    // 10,000 docs of 1 KB, 3-deep history, conflicts and tombstones
	defaultSynthSeed = 1
)

// Presets lists the preset names in a stable order.
func Presets() []string {
	return []string{PresetNoAtts, PresetAtts, PresetLarge614, PresetLarge1KB, PresetRevTree}
}

// Preset returns a named synthetic database, its document count multiplied
// by scale (rounded up, at least one document; 0 or 1 keeps the count: a
// scale above 1 grows it, so atts_db at scale 10 has the 1,100 documents
// of the original benchmark).
// The first four follow the databases of the CouchDB "new replicator"
// benchmark (Filipe Manana, 2011), atts_db cut from 1,100 to 110 documents
// each carrying all three attachments; revtree exercises the revision tree:
// every 4th document has 2 conflicting leaves and every 10th is deleted.
// ok is false for an unknown name.
func Preset(name string, scale float64) (s Synth, ok bool) {
	switch name {
	case PresetNoAtts:
		s = Synth{Docs: 79_743, MinSize: 500, MaxSize: 3000}
	case PresetAtts:
		s = Synth{Docs: 110, MinSize: 1000, MaxSize: 2000, Atts: []int{30, 41 << 10, 2 << 20}}
	case PresetLarge614:
		s = Synth{Docs: 93_750, MinSize: 6 << 10, MaxSize: 14 << 10}
	case PresetLarge1KB:
		s = Synth{Docs: 341_298, MinSize: 1 << 10}
	case PresetRevTree:
		s = Synth{Docs: 10_000, MinSize: 1 << 10, Depth: 3, ConflictEvery: 4, Conflicts: 2, DeleteEvery: 10}
	default:
		return Synth{}, false
	}
	s.Name, s.Seed = name, defaultSynthSeed
	if scale > 1 {
		s.Docs = int(math.Ceil(float64(s.Docs) * scale))
	} else {
		s.Docs = Options{Scale: scale}.keep(s.Docs)
	}
	return s, true
}
