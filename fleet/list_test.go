package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
)

// pagingServer answers like CouchDB 2+: names sorted, startkey inclusive,
// limit honoured. before runs ahead of each page, to mutate names between
// pages.
type pagingServer struct {
	names          []string
	ignoreLimit    bool
	ignoreStartkey bool
	short          int // names dropped from the end of a limited page (CouchDB 3.2.0: 1)
	calls          int
	before         func(call int, s *pagingServer)
}

func (s *pagingServer) AllDBs(_ context.Context, startAfter string, limit int) ([]string, error) {
	s.calls++
	if s.before != nil {
		s.before(s.calls, s)
	}
	sort.Strings(s.names)
	i := 0
	if startAfter != "" && !s.ignoreStartkey {
		i = sort.SearchStrings(s.names, startAfter)
	}
	out := slices.Clone(s.names[i:])
	if limit > 0 && !s.ignoreLimit && len(out) > limit {
		out = out[:limit]
	}
	if limit > 0 && !s.ignoreLimit && s.short > 0 {
		out = out[:max(0, min(len(out), limit-s.short))]
	}
	return out, nil
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("db%04d", i)
	}
	return out
}

func TestListDBs_Pages(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 11, 25, 30} {
		s := &pagingServer{names: names(n)}
		got, err := ListDBs(t.Context(), s, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, names(n)) {
			t.Errorf("n=%d: got %d names %v", n, len(got), got)
		}
		// A short page is asked after once more (a server may answer
		// fewer names than asked while more follow).
		if want := n/10 + 2; s.calls > want {
			t.Errorf("n=%d: %d requests, want at most %d", n, s.calls, want)
		}
	}
}

func TestListDBs_ChangesBetweenPagesMissNothing(t *testing.T) {
	s := &pagingServer{names: names(30)}
	s.before = func(call int, s *pagingServer) {
		if call == 2 {
			// The last name of page 1 and an earlier one are deleted, a
			// name sorting before the cursor is created: with skip-based
			// paging this would shift names past the next page.
			s.names = slices.DeleteFunc(s.names, func(n string) bool { return n == "db0009" || n == "db0003" })
			s.names = append(s.names, "db0000a")
		}
	}
	got, err := ListDBs(t.Context(), s, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range names(30) {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s", want)
		}
	}
	if len(got) != 30 {
		t.Errorf("got %d names, want 30 (no duplicates): %v", len(got), got)
	}
}

func TestListDBs_ServerWithoutPaging(t *testing.T) {
	// PouchDB Server ignores startkey and limit and returns everything.
	s := &pagingServer{names: names(25), ignoreLimit: true, ignoreStartkey: true}
	got, err := ListDBs(t.Context(), s, 10)
	if err != nil || len(got) != 25 || s.calls != 2 {
		t.Errorf("got %d names, %d calls, err %v; want 25, 2, nil", len(got), s.calls, err)
	}
	// Exactly a page worth of names: the second request returns nothing new.
	s = &pagingServer{names: names(10), ignoreLimit: true, ignoreStartkey: true}
	got, err = ListDBs(t.Context(), s, 10)
	if err != nil || len(got) != 10 {
		t.Errorf("10 names without paging: got %d, err %v", len(got), err)
	}
}

// TestListDBs_ShortPages: a server that answers fewer names than limit
// asks for (CouchDB 3.2.0 answers limit-1) loses no name.
func TestListDBs_ShortPages(t *testing.T) {
	for _, short := range []int{1, 2, 9} {
		for _, n := range []int{0, 1, 9, 10, 11, 25, 1500} {
			s := &pagingServer{names: names(n), short: short}
			got, err := ListDBs(t.Context(), s, 10)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, names(n)) {
				t.Errorf("short=%d n=%d: got %d names", short, n, len(got))
			}
		}
	}
}

func TestListDBs_IgnoredStartkeyIsAnError(t *testing.T) {
	s := &pagingServer{names: names(25), ignoreStartkey: true}
	if _, err := ListDBs(t.Context(), s, 10); !errors.Is(err, ErrPagingIgnored) {
		t.Errorf("err = %v, want ErrPagingIgnored", err)
	}
}

func TestListDBs_Error(t *testing.T) {
	boom := errors.New("boom")
	l := ListerFunc(func(context.Context, string, int) ([]string, error) { return nil, boom })
	if _, err := ListDBs(t.Context(), l, 0); !errors.Is(err, boom) {
		t.Errorf("err = %v, want wrapping boom", err)
	}
}
