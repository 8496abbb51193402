package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// fleetRestore: the whole-server restore of the fleet case's databases
// (issue 10 point 2). sofa backs the source up into one archive, then
// restores it into a fresh target twice: from the file (databases many at
// once, each group read at its offset, under the adaptive controller) and
// from stdin (in order, one database after the other: how every restore
// ran before). Each copy is checked by the test oracle. tgtBound is the
// target's part of the fleet's needed-requests bound in seconds (`PUT /db`
// and one `_bulk_docs` per 500 documents per database, at the target's
// measured rates, the machine to itself: a restore keeps the source
// idle), 0 when it was not measured.
func (e *env) fleetRestore(ctx context.Context, base record, src *server, nDBs int, tgtBound float64) error {
	out, err := os.MkdirTemp(e.tmp, "fleet-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	archive := filepath.Join(out, "server.sofa")
	t := &table{title: "fleet: " + base.Case + ", whole-server backup and restore",
		head: append([]string{"tool"}, append(usageHead, "requests", "archive B/db", "verify")...)}

	b := base
	b.Tool = "sofa backup"
	dump, o := e.runTool(ctx, b, []*server{src}, e.sofa, "backup", src.URL, archive, "--json")
	applySofa(&dump, o)
	dump.ArchiveBytes = fileSize(archive)
	e.sink.write(dump)
	t.add(append(append([]string{dump.Tool}, usageRow(dump)...), reqCell(dump.Requests),
		fmt.Sprintf("%d", dump.ArchiveBytes/int64(max(nDBs, 1))), "-")...)
	if !dump.OK {
		t.note("sofa backup failed: %s", dump.Error)
		t.print(os.Stdout)
		return nil
	}

	times := map[string]int64{}
	for _, mode := range []struct{ tool, shell string }{
		{"sofa restore", ""},
		{"sofa restore - (in order)", "<"},
	} {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return err
		}
		b := base
		b.Tool = mode.tool
		var r record
		if mode.shell == "" {
			r, o = e.runTool(ctx, b, []*server{tgt}, e.sofa, "restore", archive, tgt.URL, "--json")
		} else {
			cmd := fmt.Sprintf("exec %s restore - %s --json < %s", shellQuote(e.sofa), shellQuote(tgt.URL), shellQuote(archive))
			r, o = e.runTool(ctx, b, []*server{tgt}, "/bin/sh", "-c", cmd)
		}
		applySofa(&r, o)
		if r.OK {
			r.Verify = e.oracle(ctx, src.URL, tgt.URL, true, !tgt.couch())
			r.OK = r.Verify == "equal"
		}
		e.sink.write(r)
		times[mode.tool] = okTime(r)
		t.add(append(append([]string{r.Tool}, usageRow(r)...), reqCell(r.Requests), "-", firstNonEmpty(r.Verify, "-"))...)
		e.stopServer(tgt)
		e.logf("fleet: %s: %s %s in %s (%s)", base.Case, r.Tool, status(r), secs(r.TimeMS), r.Verify)
	}
	t.note("restore in order / restore from the file (many databases at once) = %s", ratio(times["sofa restore - (in order)"], times["sofa restore"]))
	if tgtBound > 0 {
		ms := int64(tgtBound * 1000)
		t.note("target's needed-requests bound (PUT /db + 1 _bulk_docs per 500 docs per db at the target's measured rates, the target alone) = %s s", secs(ms))
		t.note("  sofa restore / that bound = %s", ratio(times["sofa restore"], ms))
		rec := base
		rec.Tool, rec.OK, rec.TimeMS = "restore needed-requests bound (target alone)", true, ms
		e.sink.write(rec)
	}
	t.print(os.Stdout)
	return nil
}
