//go:build unix

package transfer

import (
	"errors"
	"syscall"
)

// oNoFollow makes an open fail on a symbolic link.
const oNoFollow = syscall.O_NOFOLLOW

// isSymlinkRefusal says err is an open's refusal of a symbolic link under oNoFollow.
func isSymlinkRefusal(err error) bool { return errors.Is(err, syscall.ELOOP) }
