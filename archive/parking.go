package archive

import (
	"fmt"
	"io"
	"os"
)

// maxHeldSpools is how many closed databases waiting in line for the
// archive's stream keep their own spool file open. The groups of the
// next ones are moved into the writer's parking file, one file however
// many wait: a backup of thousands of small databases into a slow stream
// (an upload, a pipe) needs a few file descriptors per database being
// read, not one per database read so far.
const maxHeldSpools = 16

// parking is one unlinked temporary file holding, end to end, the spooled
// groups of databases waiting in line beyond maxHeldSpools; emptied when
// the line is.
type parking struct {
	dir  string
	file *os.File
	end  int64
}

// waitInLineLocked is called (w.mu held) for d, closed and queued behind
// the stream's owner: it keeps its spool open while fewer than
// maxHeldSpools do, else its group is moved into the parking file and
// its spool closed.
func (w *Writer) waitInLineLocked(d *DBWriter) {
	if d.spool == nil || w.err != nil {
		return
	}
	if w.held < maxHeldSpools {
		d.held = true
		w.held++
		return
	}
	sec, err := w.parking.park(d.spool)
	if err != nil {
		w.fail(fmt.Errorf("archive: spool of %q: %w", d.name, err))
		return
	}
	d.removeSpool()
	d.parked = sec
}

// park appends the whole of spool to the parking file (created at the
// first) and returns the section it now fills.
func (p *parking) park(spool *os.File) (*io.SectionReader, error) {
	if p.file == nil {
		f, err := os.CreateTemp(p.dir, "sofa-spool-*.tar")
		if err != nil {
			return nil, err
		}
		_ = os.Remove(f.Name()) // unlinked at once where the OS allows: no leftovers
		p.file = f
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	n, err := io.Copy(io.NewOffsetWriter(p.file, p.end), spool)
	if err != nil {
		return nil, err
	}
	sec := io.NewSectionReader(p.file, p.end, n)
	p.end += n
	return sec, nil
}

// reset empties the parking file once no group waits in it.
func (p *parking) reset() {
	if p.file != nil && p.end > 0 {
		if p.file.Truncate(0) == nil {
			p.end = 0
		}
	}
}

func (p *parking) close() {
	if p.file != nil {
		_ = p.file.Close()
		_ = os.Remove(p.file.Name())
		p.file = nil
	}
}
