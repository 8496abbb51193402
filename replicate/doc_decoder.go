package replicate

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/jsonx"
)

func unquote(s []byte) string { return jsonx.Unquote(s) }

// pooledDecoder is a decoder over an in-memory JSON value, reused across
// ParseDoc calls: a jsontext.Decoder reading a bytes.Buffer parses the
// bytes in place, and reuse saves its allocation.
type pooledDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

// docOpts: bodies are raw bytes carried as they are, so strings may hold
// invalid UTF-8 or escaped lone surrogates ("\ud800", which PouchDB Server
// accepts); a target that refuses them reports that one revision.
var docOpts = []jsontext.Options{jsontext.AllowInvalidUTF8(true)}

// bodyOpts check a whole body in ParseDoc: names may repeat there, as the
// body is carried as it is (the envelope's names are checked by scanDoc;
// `_revisions` and `_attachments` are decoded with docOpts).
var bodyOpts = []jsontext.Options{jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)}

func getDecoder(b []byte, opts ...jsontext.Options) *pooledDecoder {
	if opts == nil {
		opts = docOpts
	}
	pd := decoders.Get().(*pooledDecoder)
	pd.buf = *bytes.NewBuffer(b)
	pd.dec.Reset(&pd.buf, opts...)
	return pd
}

// putDecoder returns pd to the pool, dropping its reference to the input.
func putDecoder(pd *pooledDecoder) {
	pd.buf = bytes.Buffer{}
	pd.dec.Reset(&pd.buf)
	decoders.Put(pd)
}

// valueString returns the content of a JSON string value.
func valueString(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	return jsonx.Unquote(v), true
}

// valueInt returns the value of a JSON integer; a number that is not an
// int64 (1.5, 1e30) gives 0 and ok, anything else not ok.
func valueInt(v jsontext.Value) (int64, bool) {
	if v.Kind() != '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, true
	}
	return n, true
}
