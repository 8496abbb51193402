package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// backupReadBound runs bench/cmd/boundread over the source's databases
// (readBound): its time is its timed reading only.
func (e *env) backupReadBound(ctx context.Context, src *server, caseName string, dbs []string, run int) record {
	r := e.readBound(ctx, src, record{Bench: "backup", Case: caseName, Tool: "bound-read", Run: run}, dbs)
	e.logf("backup: %s: run %d bound-read %s in %s", caseName, run, status(r), secs(r.TimeMS))
	return r
}

// readBound runs bench/cmd/boundread (built into the scratch directory on
// first use) with flags over the source's databases dbs and writes its
// record (b completed): time = its timed reading only, server cpu = the
// source's for the whole run (its listing aside, all of it reading).
func (e *env) readBound(ctx context.Context, src *server, b record, dbs []string, flags ...string) record {
	b.Note = "time = timed reading of every leaf revision (_changes pages of 10,000, _bulk_get?revs=true&attachments=true of 500, 4 in flight, databases one after another), answers discarded unparsed"
	if slices.Contains(flags, "-multipart") {
		b.Note += "; _bulk_get answers as multipart/mixed (raw attachments)"
	}
	bin, err := e.buildTool(ctx, "boundread")
	if err != nil {
		b.Error = err.Error()
		e.sink.write(b)
		return b
	}
	r, o := e.runTool(ctx, b, []*server{src}, bin, append(append(flags, src.URL), dbs...)...)
	pr := applyPeer(&r, o)
	r.TimeMS = int64(pr.MS)
	e.sink.write(r)
	return r
}

// restoreIngestBound measures the ingest bound of a restore (run run):
// into a fresh target server, every database's leaf revisions, read from
// src and prepared untimed, are stored in the target's cheapest form,
// databases one after another, and only the storing is timed:
// bound-bulkdocs.js (pre-built `_bulk_docs` bodies with new_edits=false)
// at each batch/parallel setting of -bound-sweep, or, for atts (one leaf
// per document, large attachments), bench/cmd/boundingest
// (multipart/related PUTs, attachments as raw parts) at each parallelism
// of -seeds-atts-ingest. It returns one record per setting (tool
// "bound-ingest SETTING"); bestIngest picks the bound among them. No
// restore can finish before its target has stored what it restores.
func (e *env) restoreIngestBound(ctx context.Context, src *server, caseName string, dbs []string, atts bool, run int) []record {
	fail := func(err error) []record {
		r := record{Bench: "backup", Case: caseName, Tool: "bound-ingest", Run: run, Error: err.Error()}
		e.sink.write(r)
		return []record{r}
	}
	tgt, err := e.startServer(ctx)
	if err != nil {
		return fail(err)
	}
	defer e.stopServer(tgt)
	type setting struct {
		name string
		args func(db, s, t string) (string, []string)
	}
	var settings []setting
	if atts {
		bin, err := e.buildTool(ctx, "boundingest")
		if err != nil {
			return fail(err)
		}
		for _, par := range e.cfg.attsIngestSweep {
			settings = append(settings, setting{fmt.Sprintf("boundingest %d", par), func(db, s, t string) (string, []string) {
				return bin, []string{"-parallel", strconv.Itoa(par), "-spool", filepath.Join(e.tmp, "spool-restore-"+sanitize(caseName+" "+db)), s, t}
			}})
		}
	} else {
		for _, p := range e.cfg.boundSweep {
			settings = append(settings, setting{"bound-bulkdocs " + p.String(), func(db, s, t string) (string, []string) {
				return e.node("bound-bulkdocs.js", s, t, strconv.Itoa(p[0]), strconv.Itoa(p[1]))
			}})
		}
	}
	var out []record
	for i, st := range settings {
		r := record{Bench: "backup", Case: caseName, Tool: "bound-ingest " + st.name, Run: run, OK: true,
			Note: "time = the timed storing of every database's leaf revisions into a fresh target, databases one after another; the reading from the source and the preparation are untimed"}
		for _, db := range dbs {
			// a database of its own per setting and run: boundingest creates it
			name, args := st.args(db, dbURL(src.URL, db), dbURL(tgt.URL, fmt.Sprintf("%s-bound%d-%d", db, i, run)))
			one, o := e.runTool(ctx, record{Bench: "backup", Case: caseName, Tool: r.Tool}, []*server{tgt}, name, args...)
			pr := applyPeer(&one, o)
			if !one.OK {
				r.OK, r.Error = false, fmt.Sprintf("%s: %s", db, one.Error)
				break
			}
			r.TimeMS += int64(pr.MS)
			r.Docs += one.Docs
		}
		e.sink.write(r)
		e.logf("backup: %s: run %d %s %s in %s", caseName, run, r.Tool, status(r), secs(r.TimeMS))
		out = append(out, r)
	}
	return out
}

// bestIngest is the ingest bound over runs: each setting's median over
// the runs (its single run with one), the fastest setting's median
// counting (Extra "best" names it); no setting OK: the first error.
func bestIngest(e *env, caseName string, order []string, byTool map[string][]record) record {
	best := record{Bench: "backup", Case: caseName, Tool: "bound-ingest"}
	for _, tool := range order {
		r := summary(e, byTool[tool])
		if r.OK && (!best.OK || r.TimeMS < best.TimeMS) {
			best.OK, best.TimeMS, best.Docs, best.Error = true, r.TimeMS, r.Docs, ""
			best.Extra = map[string]any{"best": strings.TrimPrefix(tool, "bound-ingest ")}
		} else if !best.OK && best.Error == "" {
			best.Error = r.Error
		}
	}
	return best
}

// buildTool builds bench/cmd/NAME into the scratch directory on first use
// and returns the binary's path.
func (e *env) buildTool(ctx context.Context, name string) (string, error) {
	bin := filepath.Join(e.tmp, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/cmd/"+name)
	build.Dir, build.Stderr = e.root, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build bench/cmd/%s: %w", name, err)
	}
	return bin, nil
}
