// Command altratio compares two sofa builds from benchmark records in
// which one ran as tool "sofa" and the other as "sofa-alt" (benchrun's
// -sofa-alt), as the library reshaping of issue 11 was compared with the
// build before it. Runs of the same case are taken in both orders (each
// build once as "sofa", once as "sofa-alt") because the tool run first on
// a freshly loaded source is often faster or slower by more than the
// difference sought.
//
//	altratio -new BIN FILE.jsonl...
//
// BIN is the path of the newer build as the records name it: a file where
// "sofa-alt"'s note is "sofa binary BIN" ran the new build as sofa-alt,
// any other file ran it as sofa. For each benchmark and case, it prints
// (with the server kind) new/old wall time per file (the median record of a replicate case, the
// one record of a fleet case) and their geometric mean. Ratios above 1
// mean the new build was slower.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

type record struct {
	Bench  string `json:"bench"`
	Case   string `json:"case"`
	Tool   string `json:"tool"`
	OK     bool   `json:"ok"`
	WallMS int64  `json:"wall_ms"`
	Run    int    `json:"run"`
	Note   string `json:"note"`
	Extra  struct {
		Server string `json:"server"`
	} `json:"extra"`
}

func main() {
	newBin := flag.String("new", "", "path of the newer sofa build, as the records' notes name it")
	flag.Parse()
	if *newBin == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: altratio -new BIN FILE.jsonl...")
		os.Exit(2)
	}
	ratios := map[string][]float64{} // "server bench: case" -> new/old per file
	var keys []string
	for _, f := range flag.Args() {
		got, err := fileRatios(f, *newBin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "altratio:", err)
			os.Exit(1)
		}
		for k, r := range got {
			if _, seen := ratios[k]; !seen {
				keys = append(keys, k)
			}
			ratios[k] = append(ratios[k], r)
			fmt.Printf("%-60s %s: new/old %.3f\n", k, f, r)
		}
	}
	sort.Strings(keys)
	fmt.Println()
	for _, k := range keys {
		rs := ratios[k]
		sum := 0.0
		for _, r := range rs {
			sum += math.Log(r)
		}
		fmt.Printf("%-60s geometric mean of %d: new/old %.3f\n", k, len(rs), math.Exp(sum/float64(len(rs))))
	}
}

// fileRatios reads one records file and returns new/old wall time per
// "server bench: case" where both builds ran and succeeded.
func fileRatios(path, newBin string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	wall := map[string]map[string]int64{} // key -> tool -> wall ms
	newIsAlt := false
	server := "" // from the run's env record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if r.Bench == "env" {
			server = r.Extra.Server
			continue
		}
		if r.Run != 0 || !r.OK {
			continue // not a record, one run of several (the median follows), or failed
		}
		if r.Tool != "sofa" && r.Tool != "sofa-alt" {
			continue
		}
		if r.Tool == "sofa-alt" && strings.TrimPrefix(r.Note, "sofa binary ") == newBin {
			newIsAlt = true
		}
		k := server + " " + r.Bench + ": " + r.Case
		if wall[k] == nil {
			wall[k] = map[string]int64{}
		}
		wall[k][r.Tool] = r.WallMS
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]float64{}
	for k, w := range wall {
		s, a := w["sofa"], w["sofa-alt"]
		if s == 0 || a == 0 {
			continue
		}
		if newIsAlt {
			out[k] = float64(a) / float64(s)
		} else {
			out[k] = float64(s) / float64(a)
		}
	}
	return out, nil
}
