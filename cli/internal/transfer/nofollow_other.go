//go:build !unix

package transfer

// oNoFollow is none where the system has no O_NOFOLLOW: Existing's check before the
// open stands in for it.
const oNoFollow = 0

func isSymlinkRefusal(error) bool { return false }
