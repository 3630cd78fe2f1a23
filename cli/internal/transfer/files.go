package transfer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// openPart opens the part file at path for reading and writing, never through a
// symbolic link: an earlier run's part (to go on from), or else a new file, created
// exclusively (created says so). Anything but a regular file there is refused.
func openPart(path string) (f *os.File, created bool, err error) {
	if _, err := Existing(path); err != nil {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|oNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow, 0o644)
		created = err == nil
	}
	if err != nil {
		if isSymlinkRefusal(err) {
			return nil, false, &localError{fmt.Errorf("%s is a symbolic link: not written through; remove it and run again", path)}
		}
		return nil, false, &localError{err}
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file: remove it and run again", path)
	}
	if err != nil {
		f.Close()
		return nil, false, &localError{err}
	}
	return f, created, nil
}

// Existing describes what is at path without following a symbolic link: nil when
// nothing is there, an error when it is a symbolic link or not a regular file (a
// download never writes through, over or into such a thing).
func Existing(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, &localError{err}
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &localError{fmt.Errorf("%s is a symbolic link: not followed; move it away or choose another directory (-o)", path)}
	case !fi.Mode().IsRegular():
		return nil, &localError{fmt.Errorf("%s exists and is not a regular file: move it away or choose another directory (-o)", path)}
	}
	return fi, nil
}

// Place moves the finished file from to path, which must not exist: what appeared at
// path meanwhile (a file, a symbolic link) is left alone and the move fails. It makes a
// hard link, so that the kernel refuses an existing path, and falls back to a rename
// after a check where the file system has no hard links.
func Place(from, path string) error {
	err := os.Link(from, path)
	if err == nil {
		return os.Remove(from)
	}
	if errors.Is(err, fs.ErrExist) {
		return &localError{fmt.Errorf("%s appeared during the download: left as it is; move it away and run again", path)}
	}
	if fi, err := Existing(path); err != nil || fi != nil {
		if err == nil {
			err = &localError{fmt.Errorf("%s appeared during the download: left as it is; move it away and run again", path)}
		}
		return err
	}
	if err := os.Rename(from, path); err != nil {
		return &localError{err}
	}
	return nil
}
