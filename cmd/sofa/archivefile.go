package main

import (
	"github.com/sofadb/sofa/storage"
)

// archives is where archive files live: the local file system, "-" for
// stdin and stdout (temporary name, flock, fsync, rename and the sweep of
// leftovers of killed backups are storage.Local's). s3:// archives are
// in the S3 store of s3Flags.
var archives storage.Store = storage.Local{}
