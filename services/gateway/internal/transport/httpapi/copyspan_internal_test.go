package httpapi

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// writeSizes records the size of each Write.
type writeSizes struct {
	bytes.Buffer
	sizes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.Buffer.Write(p)
}

// TestCopySpan: copySpan writes exactly n bytes, in writes of a whole buffer (the
// last one what is left) however small the reads, and stops at the reader's error
// with what it read written.
func TestCopySpan(t *testing.T) {
	t.Parallel()
	data := make([]byte, 2*copyBufferSize+1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	boom := errors.New("store went away")
	for _, tc := range []struct {
		name      string
		r         io.Reader
		n         int64
		want      int64
		wantErr   error
		wantSizes []int
	}{
		{"the whole reader, in small reads", iotest.HalfReader(bytes.NewReader(data)), int64(len(data)), int64(len(data)), nil,
			[]int{copyBufferSize, copyBufferSize, 1000}},
		{"a span shorter than the reader", bytes.NewReader(data), copyBufferSize + 5, copyBufferSize + 5, nil,
			[]int{copyBufferSize, 5}},
		{"a reader shorter than the span", bytes.NewReader(data[:100]), 200, 100, io.ErrUnexpectedEOF, []int{100}},
		{"a reader that fails midway", io.MultiReader(bytes.NewReader(data[:copyBufferSize+10]), iotest.ErrReader(boom)),
			int64(len(data)), copyBufferSize + 10, boom, []int{copyBufferSize, 10}},
		{"nothing", bytes.NewReader(data), 0, 0, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w writeSizes
			n, err := copySpan(&w, tc.r, tc.n)
			if n != tc.want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("copySpan = %d, %v; want %d, %v", n, err, tc.want, tc.wantErr)
			}
			if !bytes.Equal(w.Bytes(), data[:n]) {
				t.Fatal("the bytes written are not the reader's")
			}
			if !slices.Equal(w.sizes, tc.wantSizes) {
				t.Fatalf("writes of %v bytes, want %v", w.sizes, tc.wantSizes)
			}
		})
	}
}
