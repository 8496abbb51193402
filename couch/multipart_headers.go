package couch

import (
	"mime"
	"strings"
)

// dispositionFilename returns the filename parameter of a
// Content-Disposition value. CouchDB writes the name raw between quotes
// (no escaping, any UTF-8), which mime.ParseMediaType may refuse, so the
// text between the first `filename="` and the last `"` is the fallback.
func dispositionFilename(v string) string {
	if v == "" {
		return ""
	}
	if _, params, err := mime.ParseMediaType(v); err == nil {
		if name, ok := params["filename"]; ok {
			return name
		}
	}
	const key = `filename="`
	i := strings.Index(v, key)
	if i < 0 {
		return ""
	}
	rest := v[i+len(key):]
	j := strings.LastIndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// mediaType parses a Content-Type value into its lower-case media type and
// parameters. Values mime.ParseMediaType refuses (CouchDB writes inner
// boundaries unquoted, and they may hold characters outside a token) are
// split by hand on ";" and "=".
func mediaType(v string) (string, map[string]string) {
	if mt, params, err := mime.ParseMediaType(v); err == nil {
		return mt, params
	}
	parts := strings.Split(v, ";")
	mt := strings.ToLower(strings.TrimSpace(parts[0]))
	params := make(map[string]string, len(parts)-1)
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		params[strings.ToLower(strings.TrimSpace(k))] = val
	}
	return mt, params
}
