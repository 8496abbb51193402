package jsonx

import "bytes"

// Walkers of JSON already known to be valid (a value a jsontext.Decoder
// returned, or one jsontext checked): they only find where values end,
// jumping over strings with bytes.IndexByte, so a hot path that must look
// at a few top-level members of a validated value walks it once instead
// of tokenizing it again. On input that is not valid JSON they return -1
// or a wrong index, never panic.

// SkipSpace returns the index of the first byte at or after i that is
// not JSON whitespace (len(b) if none).
func SkipSpace(b []byte, i int) int {
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

// StringEnd returns the index just past the string literal whose opening
// quote is b[i], or -1.
func StringEnd(b []byte, i int) int {
	j := i + 1
	for j <= len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0 // backslashes right before the quote
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// ValueEnd returns the index just past the JSON value starting at b[i], or
// -1.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := StringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i // number, true, false, null
	for ; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			if j == i {
				return -1
			}
			return j
		}
	}
	return j
}

// Plain reports whether s, the content of a string literal, is its value
// as it stands: printable ASCII, no escape (so no decoding, and no
// invalid UTF-8 for a decoder to replace).
func Plain(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}
