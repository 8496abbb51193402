package replicate_test

import (
	"encoding/base64"

	"github.com/sofadb/sofa/internal/couchtest"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// pouch compares by couchtest's "Equal" (couchtest.CompareDBs), accepting
// PouchDB Server's revpos reset (see couchtest.CompareOptions.PouchDBRevpos).
var pouch = couchtest.CompareOptions{PouchDBRevpos: true}
