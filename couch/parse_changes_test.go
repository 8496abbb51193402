package couch

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sofadb/sofa/replicate"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func collectChanges(t testing.TB, parse func(io.Reader, func(replicate.Change) error) (ChangesEnd, error), body []byte) ([]replicate.Change, ChangesEnd, error) {
	t.Helper()
	var got []replicate.Change
	end, err := parse(bytes.NewReader(body), func(c replicate.Change) error {
		got = append(got, c)
		return nil
	})
	return got, end, err
}

func TestParseChanges_CouchDB3(t *testing.T) {
	got, end, err := collectChanges(t, ParseChanges, readTestdata(t, "changes_couch3.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []replicate.Change{
		{Seq: replicate.Seq(`"1-g1AAAAFReJzLYWBg4MhgTmHgz8tPSTV0MDQy1zMAQsMcoARTIkOS_P___7MSGXAqSVIAkkn2IFUZzIlMuUAB9hRDAzNLA1NsenAakcACJOsPUJBsD1FnaJZkmZyUiE1PFgBQ5SUF"`),
			ID: "a/b", Revs: []string{"1-967a00dff5e02add41819138abb3284d"}},
		// seq_interval: seq null is kept as a nil Seq
		{ID: "deleted-doc", Revs: []string{"2-eec205a9d413992850a6e32678485900", "3-fe1a2bd0b8c4b8d7a2a3c04a8b20dd0e"}, Deleted: true},
		// row with empty id skipped; removed drops the first rev; a
		// removed row left without revs is skipped
		{Seq: replicate.Seq(`"4-g1AAAAF=_-"`), ID: "filtered", Revs: []string{"1-ccc"}},
		// seq after id, include_docs body skipped
		// include_docs: a live generation-1 only leaf is the whole revision.
		{Seq: replicate.Seq(`"6-g1AAAAF=_-"`), ID: "with-doc", Revs: []string{"1-eee"}, Docs: []*replicate.Doc{{
			ID: "with-doc", Rev: "1-eee", Revisions: replicate.Revisions{Start: 1, IDs: []string{"eee"}},
			Body: []byte(`{"_id":"with-doc","_rev":"1-eee","x":[1,2,{"y":null}]}`)}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if got, want := string(end.LastSeq), `"6-g1AAAAF=_-"`; got != want {
		t.Errorf("last_seq = %s, want %s", got, want)
	}
	if got, want := end.LastSeq.String(), "6-g1AAAAF=_-"; got != want {
		t.Errorf("last_seq for since= is %q, want %q", got, want)
	}
	if end.Pending != 17 {
		t.Errorf("pending = %d, want 17", end.Pending)
	}
}

func TestParseChanges_PouchDB(t *testing.T) {
	got, end, err := collectChanges(t, ParseChanges, readTestdata(t, "changes_pouch.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []replicate.Change{
		{Seq: replicate.Seq(`1`), ID: "a", Revs: []string{"1-2369e9100897829385dbfb9508287e14"}},
		{Seq: replicate.Seq(`3`), ID: "b", Revs: []string{"2-825ea7b20e8fcfba082c81b59be49265"}, Deleted: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if string(end.LastSeq) != "3" || end.Pending != -1 {
		t.Errorf("end = %s/%d, want 3/-1", end.LastSeq, end.Pending)
	}
}

func TestParseChanges_Truncated(t *testing.T) {
	body := readTestdata(t, "changes_couch3.json")
	// Cut inside the row of "filtered" (the 4th complete row is "gone").
	cut := bytes.Index(body, []byte(`"filtered"`))
	got, _, err := collectChanges(t, ParseChanges, body[:cut])
	var fe *FeedError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want *FeedError", err)
	}
	if fe.Rows != 2 || len(got) != 2 {
		t.Errorf("rows = %d (delivered %d), want 2", fe.Rows, len(got))
	}
	// The skipped empty-id row carried the last seq seen complete.
	if want := `"3-g1AAAAFReJzLYWBg4MhgTmHgz8tPSTV0MDQy1zMAQsMcoARTIkOS_P___7MSGXAqSVIAkkn2IFUZzIlMuUAB9hRDAzNLA1NsenAakcACJOsPUJBsD1FnaJZkmZyUiE1PFgBQ5SUF=_-"`; string(fe.LastSeq) != want {
		t.Errorf("LastSeq = %s, want %s", fe.LastSeq, want)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want it to wrap io.ErrUnexpectedEOF", err)
	}
	if !strings.Contains(err.Error(), "2 complete rows") {
		t.Errorf("message %q does not say how many rows were delivered", err)
	}

	// Every cut point either fails with a FeedError or, at the very end,
	// succeeds; rows delivered never exceed what a full parse gives.
	full, _, _ := collectChanges(t, ParseChanges, body)
	for i := 0; i < len(body); i++ {
		got, _, err := collectChanges(t, ParseChanges, body[:i])
		if err == nil {
			if strings.TrimSpace(string(body[i:])) != "" {
				t.Fatalf("cut at %d: no error", i)
			}
			continue
		}
		if !errors.As(err, &fe) || fe.Rows != len(got) || len(got) > len(full) {
			t.Fatalf("cut at %d: err %v, %d rows", i, err, len(got))
		}
	}
}

// A body closed without last_seq was cut (conformance C2: a proxy that
// closes the feed after 5,000 of 20,000 rows): a *FeedError saying how
// far it got, retried from there, never the feed's end.
func TestParseChanges_EndsWithoutLastSeq(t *testing.T) {
	for _, body := range []string{`{"results":[]}`, `{"results":[{"seq":"1-a","id":"x","changes":[{"rev":"1-a"}]}]}`} {
		got, _, err := collectChanges(t, ParseChanges, []byte(body))
		var fe *FeedError
		if !errors.As(err, &fe) || fe.Rows != len(got) || !errors.Is(err, io.ErrUnexpectedEOF) || malformed(err) {
			t.Errorf("%s: got %v (%d rows); want a retryable *FeedError", body, err, len(got))
		}
	}
}

func TestParseChanges_ErrorBody(t *testing.T) {
	_, _, err := collectChanges(t, ParseChanges, []byte(`{"error":"not_found","reason":"Database does not exist."}`))
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "not_found" || ce.Reason != "Database does not exist." {
		t.Errorf("err = %#v, want *Error not_found", err)
	}
}

func TestParseChanges_FnError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	_, err := ParseChanges(bytes.NewReader(readTestdata(t, "changes_couch3.json")), func(replicate.Change) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Errorf("err = %v after %d rows, want fn's error after 1", err, n)
	}
}

// A row reaches fn while the rest of the feed has not been sent yet.
func TestParseChanges_Streams(t *testing.T) {
	pr, pw := io.Pipe()
	rows := make(chan string, 2)
	done := make(chan error, 1)
	go func() {
		_, err := ParseChanges(pr, func(c replicate.Change) error {
			rows <- c.ID
			return nil
		})
		done <- err
	}()
	io.WriteString(pw, `{"results":[`+"\n"+`{"seq":1,"id":"first","changes":[{"rev":"1-a"}]},`+"\n")
	select {
	case id := <-rows:
		if id != "first" {
			t.Fatalf("row %q", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("row not delivered before the feed continued")
	}
	io.WriteString(pw, `{"seq":2,"id":"second","changes":[{"rev":"1-b"}]}],"last_seq":2}`)
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if id := <-rows; id != "second" {
		t.Errorf("row %q", id)
	}
}

func TestParseContinuousChanges(t *testing.T) {
	got, end, err := collectChanges(t, ParseContinuousChanges, readTestdata(t, "changes_continuous.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []replicate.Change{
		{Seq: replicate.Seq(`"1-g1AA"`), ID: "a", Revs: []string{"1-a"}},
		{Seq: replicate.Seq(`"2-g1AB"`), ID: "b", Revs: []string{"1-b"}, Deleted: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if string(end.LastSeq) != `"2-g1AB"` || end.Pending != 0 {
		t.Errorf("end = %s/%d", end.LastSeq, end.Pending)
	}
}

func TestParseContinuousChanges_Cut(t *testing.T) {
	body := readTestdata(t, "changes_continuous.txt")
	cut := bytes.Index(body, []byte(`{"last_seq"`))
	got, _, err := collectChanges(t, ParseContinuousChanges, body[:cut])
	var fe *FeedError
	if !errors.As(err, &fe) || fe.Rows != 2 || len(got) != 2 || string(fe.LastSeq) != `"2-g1AB"` {
		t.Fatalf("err = %v, rows %d; want FeedError after 2 rows", err, len(got))
	}

	_, _, err = collectChanges(t, ParseContinuousChanges, []byte(`{"seq":1,"id":"a","changes":[{"rev":"1-a"}]}`+"\n"+`{"error":"timeout","reason":"The request could not be processed in a reasonable amount of time."}`+"\n"))
	var ce *Error
	if !errors.As(err, &fe) || fe.Rows != 1 || !errors.As(err, &ce) || ce.Name != "timeout" {
		t.Fatalf("err = %v, want FeedError wrapping *Error timeout after 1 row", err)
	}
}

// The continuous parser returns at the last_seq line without waiting for
// the connection to close.
func TestParseContinuousChanges_ReturnsAtLastSeq(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() {
		_, err := ParseContinuousChanges(pr, func(replicate.Change) error { return nil })
		done <- err
	}()
	io.WriteString(pw, "{\"seq\":1,\"id\":\"a\",\"changes\":[{\"rev\":\"1-a\"}]}\n\n{\"last_seq\":1}\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parser still waiting after the last_seq line")
	}
}

func TestParseChanges_Malformed(t *testing.T) {
	for _, body := range []string{
		``,
		`[]`,
		`{"results":{}}`,
		`{"results":[{"id":"a","changes":"1-a"}]}`,
		`{"results":[{"id":"a","changes":[{"rev":1}]}]}`,
		`{"results":[{"id":7,"changes":[]}]}`,
		`{"results":[1]}`,
	} {
		_, _, err := collectChanges(t, ParseChanges, []byte(body))
		if err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}
