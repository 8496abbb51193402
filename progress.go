package sofa

import "github.com/sofadb/sofa/fleet"

// Progress receives the progress of a many-database operation. Its
// methods are called from several goroutines at once.
type Progress interface {
	// Start is called once the databases are selected: dbs of them (-1:
	// not known beforehand, an archive read in order, whose databases are
	// known as they come). waiting, when not nil and called while the
	// counters stand still, says what the run waits on (see
	// StallWatch.Waiting).
	Start(dbs int, waiting func(stalled bool) string)
	// Begin is called when a database starts; the DBProgress it returns
	// receives its counters.
	Begin(db string) DBProgress
	// End is called when a database is done; failed says it failed.
	End(db string, p DBProgress, failed bool)
}

// InterruptedProgress is implemented by a Progress that counts the
// databases stopped by an interruption apart: EndInterrupted is then
// called for them instead of End.
type InterruptedProgress = fleet.InterruptedProgress

// LeftOutProgress is implemented by a Progress that takes the databases
// left out during the run (deleted at the source; Summary.LeftOut) out of
// its count of databases, as the Summary does: EndLeftOut is then called
// for them instead of End.
type LeftOutProgress = fleet.LeftOutProgress

// DBProgress receives the counters of one database as they grow.
type DBProgress = fleet.DBProgress

// NoProgress reports nothing.
var NoProgress Progress = noProgress{}

type noProgress struct{}

func (noProgress) Start(int, func(bool) string) {}
func (noProgress) Begin(string) DBProgress      { return fleet.NoDBProgress }
func (noProgress) End(string, DBProgress, bool) {}
