package couch

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestParseDBUpdates: rows with string and numeric seqs, heartbeats,
// rows without a name skipped, the closing last_seq line, an error line,
// a broken stream.
func TestParseDBUpdates(t *testing.T) {
	feed := "{\"db_name\":\"a\",\"type\":\"created\",\"seq\":\"1-g1AAAA\"}\n" +
		"\n\n" +
		"{\"db_name\":\"b/c\",\"type\":\"updated\",\"seq\":2}\n" +
		"{\"type\":\"updated\",\"seq\":\"3-x\"}\n" +
		"{\"db_name\":\"a\",\"type\":\"deleted\",\"seq\":null}\n" +
		"{\"last_seq\":\"4-y\"}\n" +
		"{\"db_name\":\"never\",\"type\":\"updated\"}\n"
	var got []DBUpdate
	err := ParseDBUpdates(strings.NewReader(feed), func(u DBUpdate) error { got = append(got, u); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []DBUpdate{{"a", "created", "1-g1AAAA"}, {"b/c", "updated", "2"}, {"a", "deleted", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	err = ParseDBUpdates(strings.NewReader("{\"db_name\":\"a\",\"type\":\"updated\",\"seq\":\"1\"}\n{\"error\":\"unauthorized\",\"reason\":\"no\"}\n"), func(DBUpdate) error { return nil })
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "unauthorized" {
		t.Errorf("error line: %v", err)
	}
	n := 0
	err = ParseDBUpdates(strings.NewReader("{\"db_name\":\"a\",\"type\":\"updated\",\"seq\":\"1\"}\n{\"db_na"), func(DBUpdate) error { n++; return nil })
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 1 {
		t.Errorf("broken stream: %v after %d rows", err, n)
	}
	err = ParseDBUpdates(strings.NewReader("\n\n"), func(DBUpdate) error { return nil })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("stream that ends: %v", err)
	}
	stop := errors.New("stop")
	if err := ParseDBUpdates(strings.NewReader(feed), func(DBUpdate) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
}
