package archive

import (
	"bytes"
	"sync"

	"github.com/sofadb/sofa/replicate"
)

// validEnvelope is scanEnvelope for a body already known to be one valid
// JSON object (read with jsontext.Decoder.ReadValue, as a record's body
// is): it walks the top-level members without validating them again,
// decoding only the four envelope members, and skips every other value
// by its brackets and quotes alone. It gives up (ok false, the caller
// then uses scanEnvelope) on what it would have to decode to compare: a
// member name with an escape, or an `_id` or `_rev` with an escape or a
// byte outside ASCII (jsontext replaces invalid UTF-8 there). Otherwise
// its envelope is the one scanEnvelope returns; a body that is not valid
// JSON gives an unspecified envelope or ok false.
//
// On the benchmarks' 1 KiB documents it reads a body in about a fifth of
// scanEnvelope's time (BenchmarkEnvelope).
func validEnvelope(body []byte) (env envelope, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return env, false
	}
	i++
	seen := 0 // bits: _id, _rev, _deleted, _revisions (envelopeBit)
	for {
		i = skipSpace(body, i)
		if i >= len(body) {
			return env, false
		}
		if body[i] == '}' {
			break
		}
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		if i >= len(body) || body[i] != '"' {
			return env, false
		}
		end := stringEnd(body, i)
		if end < 0 {
			return env, false
		}
		name := body[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return env, false
		}
		i = skipSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return env, false
		}
		v := skipSpace(body, i+1)
		vend := valueEnd(body, v)
		if vend < 0 {
			return env, false
		}
		i = vend
		bit := envelopeBitOf(name)
		if bit == 0 {
			continue
		}
		if seen&bit != 0 {
			env.ambiguous = true
		}
		seen |= bit
		val := body[v:vend]
		switch kind := val[0]; {
		case bit == 8: // _revisions
			if kind != '{' {
				env.ambiguous = true
				continue
			}
			var r replicate.Revisions
			if err := decodeRevisionsValue(val, &r); err != nil {
				return env, false // scanEnvelope says why
			}
			env.revisions, env.hasRevs = r, true
		case kind == '{' || kind == '[':
			env.ambiguous = true
		case bit == 4: // _deleted
			env.deleted = kind == 't'
		case kind != '"':
			env.ambiguous = true
		default: // _id or _rev, a string
			s := val[1 : len(val)-1]
			if !plainASCII(s) {
				return env, false
			}
			if bit == 1 {
				env.id, env.hasID = string(s), true
			} else {
				env.rev, env.hasRev = string(s), true
			}
		}
	}
	if env.ambiguous {
		env.hasID, env.hasRev, env.hasRevs = false, false, false
	}
	return env, true
}

// envelopeBitOf is envelopeBit of a member name's bytes.
func envelopeBitOf(name []byte) int {
	switch string(name) { // compared, not allocated
	case "_id":
		return 1
	case "_rev":
		return 2
	case "_deleted":
		return 4
	case "_revisions":
		return 8
	}
	return 0
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the JSON string that opens at
// b[i] (a '"'), or -1 when it does not end.
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// an odd run of backslashes before it escapes it
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}

// valueEnd returns the index just past the JSON value that begins at
// b[i], by its quotes and brackets alone (b is known valid), or -1.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = stringEnd(b, i); i < 0 {
					return -1
				}
				i-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(b); j++ { // a number, true, false or null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}

// plainASCII reports whether s holds printable ASCII only, no escape: a
// JSON string's content that is its value as it stands.
func plainASCII(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// plainRevisions decodes v when it is exactly {"start":N,"ids":[...]}
// (either order, N a plain positive integer, ids plain ASCII strings),
// as CouchDB writes it; ok false for anything else.
func plainRevisions(v []byte, r *replicate.Revisions) bool {
	i := skipSpace(v, 1) // past '{'
	var haveStart, haveIDs bool
	for i < len(v) && v[i] != '}' {
		if v[i] == ',' {
			i = skipSpace(v, i+1)
		}
		end := stringEnd(v, i)
		if i >= len(v) || v[i] != '"' || end < 0 {
			return false
		}
		name := string(v[i+1 : end-1])
		i = skipSpace(v, end)
		if i >= len(v) || v[i] != ':' {
			return false
		}
		i = skipSpace(v, i+1)
		switch {
		case name == "start" && !haveStart:
			n, j := 0, i
			for ; j < len(v) && v[j] >= '0' && v[j] <= '9' && j-i < 9; j++ {
				n = n*10 + int(v[j]-'0')
			}
			if j == i || j < len(v) && v[j] >= '0' && v[j] <= '9' {
				return false
			}
			r.Start, haveStart, i = n, true, j
		case name == "ids" && !haveIDs && i < len(v) && v[i] == '[':
			i = skipSpace(v, i+1)
			for i < len(v) && v[i] != ']' {
				if v[i] == ',' {
					i = skipSpace(v, i+1)
				}
				end := stringEnd(v, i)
				if i >= len(v) || v[i] != '"' || end < 0 || !plainASCII(v[i+1:end-1]) {
					return false
				}
				r.IDs = append(r.IDs, string(v[i+1:end-1]))
				i = skipSpace(v, end)
			}
			haveIDs, i = true, i+1
		default:
			return false
		}
		i = skipSpace(v, i)
	}
	return haveStart && haveIDs
}

// revDecoders pools the decoders of decodeRevisionsValue.
var revDecoders = sync.Pool{New: func() any { return new(envDecoder) }}

// decodeRevisionsValue decodes one `_revisions` object, v (valid JSON).
func decodeRevisionsValue(v []byte, r *replicate.Revisions) error {
	if plainRevisions(v, r) {
		return nil
	}
	*r = replicate.Revisions{}
	ed := revDecoders.Get().(*envDecoder)
	defer func() {
		ed.buf = bytes.Buffer{}
		ed.dec.Reset(&ed.buf, envOptions...)
		revDecoders.Put(ed)
	}()
	ed.buf = *bytes.NewBuffer(v)
	ed.dec.Reset(&ed.buf, envOptions...)
	return replicate.DecodeRevisions(&ed.dec, r)
}
