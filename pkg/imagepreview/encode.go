package imagepreview

import (
	"encoding/binary"
	"image"
	"math/bits"
)

// encodeJPEG appends to dst the baseline JPEG of m, a 4:2:0 YCbCr image whose bounds
// start at (0, 0), at the given quality (1-100). The file is byte for byte the one
// image/jpeg.Encode writes for m: the same quantization and Huffman tables, the same
// DCT and the same rounding. It is written faster: blocks are read straight from the
// planes, quantization multiplies by reciprocals instead of dividing, and bits are
// appended to a byte slice instead of written a byte at a time through an interface.
func encodeJPEG(dst []byte, m *image.YCbCr, quality int) []byte {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	e := jpegEncoder{out: dst}
	e.setQuality(quality)
	e.out = append(e.out, 0xff, 0xd8) // SOI
	e.writeHeaders(w, h)
	e.writeScan(m, w, h)
	e.out = append(e.out, 0xff, 0xd9) // EOI
	return e.out
}

// jpegEncoder holds the output, the bits not yet written and the quantization tables.
type jpegEncoder struct {
	out  []byte
	acc  uint64 // pending bits, the last nacc of them
	nacc uint
	// quant is the quantization tables (luminance, chrominance) in zig-zag order, as
	// written in the file; rcp and half divide by 8 × quant, rounding to nearest.
	quant [2][64]byte
	rcp   [2][64]uint64
	half  [2][64]int32
}

// setQuality scales the standard tables as image/jpeg does.
func (e *jpegEncoder) setQuality(quality int) {
	quality = min(max(quality, 1), 100)
	scale := 200 - quality*2
	if quality < 50 {
		scale = 5000 / quality
	}
	for i := range e.quant {
		for j := range e.quant[i] {
			q := min(max((int(unscaledQuant[i][j])*scale+50)/100, 1), 255)
			e.quant[i][j] = byte(q)
			d := uint64(8 * q)
			e.rcp[i][j] = (1<<32 + d - 1) / d
			e.half[i][j] = int32(d >> 1)
		}
	}
}

// quantize returns a / d rounded to the nearest integer, halves away from zero, given
// rcp = ⌈2^32 / d⌉ and half = d / 2 for a d from 8 to 2040. |a| is under 2^14 (the
// DCT's outputs), so (|a| + half) × rcp, shifted down by 32, is the exact quotient.
func quantize(a int32, rcp uint64, half int32) int32 {
	s := a >> 31
	q := int32((uint64((a^s)-s) + uint64(half)) * rcp >> 32)
	return (q ^ s) - s
}

// emit appends the low n bits of b (n ≤ 32) to the bit stream.
func (e *jpegEncoder) emit(b uint32, n uint) {
	e.out, e.acc, e.nacc = put(e.out, e.acc, e.nacc, b, n)
}

// put appends the low n bits of b (n ≤ 32) to the nacc pending bits of acc, writing 32
// of them to out once 32 are pending. It takes and returns the state so that a loop
// keeps it in registers.
func put(out []byte, acc uint64, nacc uint, b uint32, n uint) ([]byte, uint64, uint) {
	acc = acc<<n | uint64(b)
	nacc += n
	if nacc >= 32 {
		out, nacc = write32(out, acc, nacc)
	}
	return out, acc, nacc
}

// write32 appends the first 32 of the nacc pending bits of acc, each byte 0xff
// followed by a 0x00 (byte stuffing), and returns how many bits are left pending. It
// is kept out of line so that put, called for every coded value, is inlined.
//
//go:noinline
func write32(out []byte, acc uint64, nacc uint) ([]byte, uint) {
	nacc -= 32
	w := uint32(acc >> nacc)
	if (^w-0x01010101)&w&0x80808080 == 0 { // no byte of w is 0xff
		return binary.BigEndian.AppendUint32(out, w), nacc
	}
	for i := 24; i >= 0; i -= 8 {
		if b := byte(w >> i); b == 0xff {
			out = append(out, 0xff, 0x00)
		} else {
			out = append(out, b)
		}
	}
	return out, nacc
}

// flushBytes writes the whole bytes of the pending bits, with byte stuffing.
func (e *jpegEncoder) flushBytes() {
	for e.nacc >= 8 {
		e.nacc -= 8
		b := byte(e.acc >> e.nacc)
		if b == 0xff {
			e.out = append(e.out, 0xff, 0x00)
		} else {
			e.out = append(e.out, b)
		}
	}
}

// code returns the bits of a coded value: the Huffman code of run<<4 | size(v) from
// table t, then v's size bits (a negative v as v-1 in those bits), and their number.
func code(t *[256]uint32, run, v int32) (uint32, uint) {
	s := v >> 31
	n := uint(bits.Len32(uint32((v ^ s) - s)))
	c := t[(run<<4|int32(n))&0xff]
	return (c&0xffffff)<<n | uint32(v+s)&(1<<n-1), uint(c>>24) + n
}

// writeBlock transforms, quantizes and writes one block with quantization table t
// (0 luminance, 1 chrominance) and returns its quantized DC value.
func (e *jpegEncoder) writeBlock(b *block, t int, prevDC int32) int32 {
	fdct(b)
	dcTable, acTable := &huffLUT[2*t], &huffLUT[2*t+1]
	rcp, half := &e.rcp[t], &e.half[t]
	// The coefficients in zig-zag order, and a bit for each AC one that is not zero,
	// so that runs of zeros are skipped whole.
	var z [64]int32
	var nz [4]uint64 // four, so that the ORs do not wait on each other
	for zig := 0; zig < 64; zig += 4 {
		for k := range 4 {
			v := quantize(b[unzig[zig+k]&63], rcp[zig+k], half[zig+k])
			z[zig+k] = v
			nz[k] |= uint64(uint32(v|-v)>>31) << (zig + k)
		}
	}
	nonzero := (nz[0] | nz[1] | nz[2] | nz[3]) &^ 1
	out, acc, nacc := e.out, e.acc, e.nacc
	c, n := code(dcTable, 0, z[0]-prevDC)
	out, acc, nacc = put(out, acc, nacc, c, n)
	last := 0
	for nonzero != 0 {
		zig := bits.TrailingZeros64(nonzero)
		nonzero &= nonzero - 1
		run := int32(zig - last - 1)
		for ; run > 15; run -= 16 {
			c := acTable[0xf0] // sixteen zeros
			out, acc, nacc = put(out, acc, nacc, c&0xffffff, uint(c>>24))
		}
		c, n := code(acTable, run, z[zig&63])
		acc = acc<<n | uint64(c) // put, by hand: the compiler would not inline it here
		if nacc += n; nacc >= 32 {
			out, nacc = write32(out, acc, nacc)
		}
		last = zig
	}
	if last < 63 {
		c := acTable[0x00] // end of block
		out, acc, nacc = put(out, acc, nacc, c&0xffffff, uint(c>>24))
	}
	e.out, e.acc, e.nacc = out, acc, nacc
	return z[0]
}

// loadBlock fills b with the 8 × 8 samples of plane p (pw × ph, stride) at (x, y),
// repeating the last column and row past the plane's edge.
func loadBlock(b *block, p []byte, stride, pw, ph, x, y int) {
	if x+8 <= pw && y+8 <= ph {
		for j := range 8 {
			v := binary.LittleEndian.Uint64(p[(y+j)*stride+x:])
			out := b[8*j : 8*j+8 : 8*j+8]
			out[0], out[1], out[2], out[3] = int32(v&0xff), int32(v>>8&0xff), int32(v>>16&0xff), int32(v>>24&0xff)
			out[4], out[5], out[6], out[7] = int32(v>>32&0xff), int32(v>>40&0xff), int32(v>>48&0xff), int32(v>>56)
		}
		return
	}
	for j := range 8 {
		row := p[min(y+j, ph-1)*stride:]
		for i := range 8 {
			b[8*j+i] = int32(row[min(x+i, pw-1)])
		}
	}
}

// writeScan writes the SOS marker and the entropy-coded 16 × 16 MCUs: four luminance
// blocks, one Cb, one Cr.
func (e *jpegEncoder) writeScan(m *image.YCbCr, w, h int) {
	e.out = append(e.out, sosHeader...)
	cw, ch := (w+1)/2, (h+1)/2
	var b block
	var dcY, dcCb, dcCr int32
	for y := 0; y < h; y += 16 {
		for x := 0; x < w; x += 16 {
			for i := range 4 {
				dcY = e.writePlaneBlock(&b, 0, dcY, m.Y, m.YStride, w, h, x+(i&1)*8, y+(i&2)*4)
			}
			dcCb = e.writePlaneBlock(&b, 1, dcCb, m.Cb, m.CStride, cw, ch, x/2, y/2)
			dcCr = e.writePlaneBlock(&b, 1, dcCr, m.Cr, m.CStride, cw, ch, x/2, y/2)
		}
	}
	e.emit(0x7f, 7) // pad the last byte with ones
	e.flushBytes()
}

// writePlaneBlock writes the block of plane p (pw × ph, stride) at (x, y) with
// quantization table t and returns its quantized DC value. A block of one value
// (the flat areas of a screenshot) skips the DCT: its only coefficient is the DC one,
// 64 × (value - 128), exactly what the DCT gives.
func (e *jpegEncoder) writePlaneBlock(b *block, t int, prevDC int32, p []byte, stride, pw, ph, x, y int) int32 {
	if v, ok := flatBlock(p, stride, pw, ph, x, y); ok {
		dc := quantize(64*int32(v)-64*128, e.rcp[t][0], e.half[t][0])
		e.emit(code(&huffLUT[2*t], 0, dc-prevDC))
		c := huffLUT[2*t+1][0x00] // end of block
		e.emit(c&0xffffff, uint(c>>24))
		return dc
	}
	loadBlock(b, p, stride, pw, ph, x, y)
	return e.writeBlock(b, t, prevDC)
}

// flatBlock says whether the 8 × 8 samples of plane p at (x, y), all within the plane,
// are one value, and which.
func flatBlock(p []byte, stride, pw, ph, x, y int) (byte, bool) {
	if x+8 > pw || y+8 > ph {
		return 0, false
	}
	o := y*stride + x
	first := binary.LittleEndian.Uint64(p[o:])
	v := byte(first)
	if first != uint64(v)*0x0101010101010101 {
		return 0, false
	}
	for j := 1; j < 8; j++ {
		if binary.LittleEndian.Uint64(p[o+j*stride:]) != first {
			return 0, false
		}
	}
	return v, true
}

// writeHeaders writes DQT, SOF0 and DHT as image/jpeg does for a colour image.
func (e *jpegEncoder) writeHeaders(w, h int) {
	e.out = append(e.out, 0xff, 0xdb, 0x00, 2+2*65)
	for i := range e.quant {
		e.out = append(e.out, byte(i))
		e.out = append(e.out, e.quant[i][:]...)
	}
	e.out = append(e.out, 0xff, 0xc0, 0x00, 8+3*3, 8, byte(h>>8), byte(h), byte(w>>8), byte(w), 3,
		1, 0x22, 0x00, 2, 0x11, 0x01, 3, 0x11, 0x01)
	n := 2
	for _, s := range huffSpecs {
		n += 1 + 16 + len(s.value)
	}
	e.out = append(e.out, 0xff, 0xc4, byte(n>>8), byte(n))
	for i, s := range huffSpecs {
		e.out = append(e.out, "\x00\x10\x01\x11"[i])
		e.out = append(e.out, s.count[:]...)
		e.out = append(e.out, s.value...)
	}
}

// sosHeader: three components, Y with tables 0/0, Cb and Cr with tables 1/1, the whole
// spectrum in one scan.
var sosHeader = []byte{0xff, 0xda, 0x00, 0x0c, 0x03, 0x01, 0x00, 0x02, 0x11, 0x03, 0x11, 0x00, 0x3f, 0x00}

// unzig maps zig-zag order to natural order.
var unzig = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// unscaledQuant are the quantization tables of the JPEG standard (section K.1), in
// zig-zag order: luminance, chrominance.
var unscaledQuant = [2][64]byte{
	{
		16, 11, 12, 14, 12, 10, 16, 14,
		13, 14, 18, 17, 16, 19, 24, 40,
		26, 24, 22, 22, 24, 49, 35, 37,
		29, 40, 58, 51, 61, 60, 57, 51,
		56, 55, 64, 72, 92, 78, 64, 68,
		87, 69, 55, 56, 80, 109, 81, 87,
		95, 98, 103, 104, 103, 62, 77, 113,
		121, 112, 100, 120, 92, 101, 103, 99,
	},
	{
		17, 18, 18, 24, 21, 24, 47, 26,
		26, 47, 99, 66, 56, 66, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
	},
}

// huffSpec is a Huffman table as a DHT marker holds it: how many codes of each length
// (1-16 bits), then the values in code order.
type huffSpec struct {
	count [16]byte
	value []byte
}

// huffSpecs are the standard tables (section K.3): luminance DC, luminance AC,
// chrominance DC, chrominance AC.
var huffSpecs = [4]huffSpec{
	{
		[16]byte{0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
		[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	},
	{
		[16]byte{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125},
		[]byte{
			0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12,
			0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
			0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08,
			0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
			0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16,
			0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
			0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
			0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
			0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
			0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
			0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79,
			0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
			0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
			0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
			0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6,
			0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
			0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4,
			0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
			0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea,
			0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		},
	},
	{
		[16]byte{0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
		[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	},
	{
		[16]byte{0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119},
		[]byte{
			0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21,
			0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
			0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91,
			0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
			0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34,
			0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
			0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38,
			0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
			0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
			0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
			0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,
			0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
			0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96,
			0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
			0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4,
			0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
			0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2,
			0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
			0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9,
			0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		},
	},
}

// huffLUT maps each value of huffSpecs[i] to its code: the length in the top 8 bits,
// the code in the low 24.
var huffLUT = func() (t [4][256]uint32) {
	for i, s := range huffSpecs {
		code, k := uint32(0), 0
		for n, c := range s.count {
			for range c {
				t[i][s.value[k]] = uint32(n+1)<<24 | code
				code++
				k++
			}
			code <<= 1
		}
	}
	return t
}()
