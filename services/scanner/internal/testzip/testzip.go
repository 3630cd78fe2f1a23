// Package testzip builds the zip archives the scanner's tests hand clamd: archives it
// cannot judge (over its size limits, encrypted, too many files), each with a payload
// behind what stops clamd, so that a clamd that gives up and answers OK lets the
// payload through.
package testzip

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/rand"
	"fmt"
	"hash/crc32"
	"io"
)

// ZerosThen is a zip of one entry (deflated: a few KiB per MiB of zeros): n zero bytes
// and then payload.
func ZerosThen(n int64, payload []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestSpeed)
	})
	w, err := zw.Create("report.bin")
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(zeros)) {
		if _, err := w.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			return nil, err
		}
	}
	if _, err := w.Write(payload); err != nil {
		return nil, err
	}
	return finish(zw, &buf)
}

// ManyFiles is a zip of n small files and then payload.
func ManyFiles(n int, payload []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		if err := add(zw, fmt.Sprintf("f%05d.txt", i), []byte("x")); err != nil {
			return nil, err
		}
	}
	if err := add(zw, "zz-last.txt", payload); err != nil {
		return nil, err
	}
	return finish(zw, &buf)
}

// Encrypted is a zip of one entry, payload, encrypted with password by the
// traditional PKWARE scheme (ZipCrypto, what "zip -e" writes), stored uncompressed.
func Encrypted(password string, payload []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	crc := crc32.ChecksumIEEE(payload)
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name: "secret.txt", Method: zip.Store, Flags: 0x1, // bit 0: encrypted
		CRC32: crc, CompressedSize64: uint64(12 + len(payload)), UncompressedSize64: uint64(len(payload)),
	})
	if err != nil {
		return nil, err
	}
	// The 12-byte encryption header: random bytes, the last one the CRC's high byte
	// (what a reader checks the password against).
	head := make([]byte, 12)
	if _, err := rand.Read(head[:11]); err != nil {
		return nil, err
	}
	head[11] = byte(crc >> 24)
	k := newZipCrypto(password)
	if _, err := w.Write(k.encrypt(append(head, payload...))); err != nil {
		return nil, err
	}
	return finish(zw, &buf)
}

func add(zw *zip.Writer, name string, b []byte) error {
	w, err := zw.Create(name)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func finish(zw *zip.Writer, buf *bytes.Buffer) ([]byte, error) {
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipCrypto holds the three keys of the traditional PKWARE encryption (APPNOTE.TXT,
// 6.1).
type zipCrypto struct{ k0, k1, k2 uint32 }

func newZipCrypto(password string) *zipCrypto {
	z := &zipCrypto{k0: 0x12345678, k1: 0x23456789, k2: 0x34567890}
	for i := range len(password) {
		z.update(password[i])
	}
	return z
}

func crc32Byte(crc uint32, b byte) uint32 {
	return crc32.IEEETable[byte(crc)^b] ^ crc>>8
}

func (z *zipCrypto) update(b byte) {
	z.k0 = crc32Byte(z.k0, b)
	z.k1 = (z.k1+z.k0&0xff)*134775813 + 1
	z.k2 = crc32Byte(z.k2, byte(z.k1>>24))
}

func (z *zipCrypto) encrypt(plain []byte) []byte {
	out := make([]byte, len(plain))
	for i, p := range plain {
		t := uint16(z.k2 | 2)
		out[i] = p ^ byte((t*(t^1))>>8)
		z.update(p)
	}
	return out
}
