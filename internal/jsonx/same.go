package jsonx

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Same reports whether a and b hold the same JSON value (key order and
// spacing aside), e.g. two reads of a `_security`; bytes that do not parse
// compare as bytes.
func Same(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}
