package sofa

import (
	"context"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/storage"
)

// checkReplaceable lets an overwriting Create (--force) replace name in
// store only when name is missing, empty or begins with a sofa archive's
// header: --force replaces archives, never another file that happens to
// bear the name. It returns a usage error (*OptionError) otherwise.
func checkReplaceable(ctx context.Context, store storage.Store, name string, overwrite bool) error {
	if !overwrite || name == storage.Stdio {
		return nil
	}
	f, err := store.Open(ctx, name)
	if err != nil {
		return nil // nothing to replace (or unreadable: the commit says why)
	}
	defer f.Close()
	if f.Size() == 0 {
		return nil
	}
	if _, err := archive.ReadHeader(f); err != nil {
		return optionErr("%s exists and is not a sofa archive: --force replaces archives only (remove it to reuse the name)", name)
	}
	return nil
}
