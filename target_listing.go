package sofa

import (
	"context"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
)

// targetListing is the target server's databases, listed once at the
// start of a run so that a database it lacks is created without being
// asked for first (one request less each on a first run).
//
// A run may start its databases before the listing is in (a restore
// lists while it reads its archives' indexes, and does not wait for it):
// until then every database is created first. That is as sound: a
// database that exists answers the create with 412 and is then judged
// as any existing one (prepareTarget), at one request more, and a
// refused create is followed by the request a run without a listing
// makes (targetRules.CreateFirst). A restore of
// a few databases so saves the listing's round trips before its first
// write (on CouchDB 3.5, 10,000 x 1 KiB: the listing ended 14 ms into a
// 0.6 s restore, the database's create waited for it).
type targetListing struct {
	done chan struct{}
	on   map[string]bool // nil: the listing failed; every database is asked for
}

// listedTarget returns a listing that is already in; on nil means none
// (every database is asked for first).
func listedTarget(on map[string]bool) *targetListing {
	l := &targetListing{done: make(chan struct{}), on: on}
	close(l.done)
	return l
}

// listTarget lists the target server's databases and waits for them.
func listTarget(ctx context.Context, ts replicate.TargetServer, rc *RunControl) *targetListing {
	return listedTarget(listTargetNames(ctx, ts, rc))
}

// listTargetLater lists the target server's databases in the background.
// end stops the listing if it is still going and waits for it to stop;
// call it once the run is over.
func listTargetLater(ctx context.Context, ts replicate.TargetServer, rc *RunControl) (l *targetListing, end func()) {
	l = &targetListing{done: make(chan struct{})}
	lctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		on := listTargetNames(lctx, ts, rc)
		if lctx.Err() == nil {
			l.on = on
			close(l.done)
		}
	}()
	return l, func() {
		cancel()
		<-stopped
	}
}

// listTargetNames lists ts's databases; nil when the listing fails
// (logged unless ctx was stopped). An archive being written lists none:
// every database is new.
func listTargetNames(ctx context.Context, ts replicate.TargetServer, rc *RunControl) map[string]bool {
	names, err := fleet.ListDBs(ctx, ts, 1000)
	if err != nil {
		if ctx.Err() == nil { // a stopped run or listing says nothing
			rc.logf("target: list databases: %v (asking for each database instead)", err)
		}
		return nil
	}
	on := make(map[string]bool, len(names))
	for _, n := range names {
		on[n] = true
	}
	return on
}

// lookup says how the database name is prepared: absent, the listing is
// in and lacks it (it is created without being asked for first);
// pending, the listing is not in yet (it is created first, and asked
// for if that is refused: targetRules.CreateFirst). Neither: it is asked
// for first (listed, or no listing: a nil one, or a failed one).
func (l *targetListing) lookup(name string) (absent, pending bool) {
	if l == nil {
		return false, false
	}
	select {
	case <-l.done:
		return l.on != nil && !l.on[name], false
	default:
		return false, true
	}
}
