package imagepreview

import (
	"encoding/binary"
	"image"
)

// scaleYCbCr scales a YCbCr image (a JPEG's) to w × h as a 4:2:0 YCbCr image, plane by
// plane with bilinear sampling, so that the JPEG encoder takes it as it is, with no
// conversion to RGB and back.
func scaleYCbCr(src *image.YCbCr, w, h int) *image.YCbCr {
	dst := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	b := src.Bounds()
	scalePlane(dst.Y, dst.YStride, w, h, src.Y[src.YOffset(b.Min.X, b.Min.Y):], src.YStride, b.Dx(), b.Dy())
	cw, ch := chromaSize(src.SubsampleRatio, b)
	dcw, dch := (w+1)/2, (h+1)/2
	off := src.COffset(b.Min.X, b.Min.Y)
	scalePlane(dst.Cb, dst.CStride, dcw, dch, src.Cb[off:], src.CStride, cw, ch)
	scalePlane(dst.Cr, dst.CStride, dcw, dch, src.Cr[off:], src.CStride, cw, ch)
	return dst
}

// chromaSize is the size of the chroma planes of an image of bounds b.
func chromaSize(r image.YCbCrSubsampleRatio, b image.Rectangle) (int, int) {
	w, h := b.Dx(), b.Dy()
	switch r {
	case image.YCbCrSubsampleRatio422:
		return (w + 1) / 2, h
	case image.YCbCrSubsampleRatio420:
		return (w + 1) / 2, (h + 1) / 2
	case image.YCbCrSubsampleRatio440:
		return w, (h + 1) / 2
	case image.YCbCrSubsampleRatio411:
		return (w + 3) / 4, h
	case image.YCbCrSubsampleRatio410:
		return (w + 3) / 4, (h + 1) / 2
	}
	return w, h
}

// tap is where a destination pixel samples its source: between positions i0 and i1,
// w/256 of the way to i1. i1 is i0+1, but for a source of one pixel.
type tap struct{ i0, i1, w int32 }

// taps maps each of dn destination positions to the source positions around its
// centre, of sn source positions spread over the same length.
func taps(dn, sn int) []tap {
	t := make([]tap, dn)
	for d := range t {
		f := max(0, ((2*d+1)*sn<<16/(2*dn))-1<<15) // 16.16
		i0, w := f>>16, (f&0xffff+0x80)>>8
		if i0 >= sn-1 { // at the last pixel: all of it
			i0, w = max(sn-2, 0), 256
		}
		t[d] = tap{int32(i0), int32(min(i0+1, sn-1)), int32(w)}
	}
	return t
}

// scalePlane fills the dw × dh plane dst from the sw × sh plane src, each pixel the
// bilinear blend of the four source pixels around its centre.
func scalePlane(dst []byte, dstStride, dw, dh int, src []byte, srcStride, sw, sh int) {
	if dw <= 0 || dh <= 0 || sw <= 0 || sh <= 0 {
		return
	}
	xs := taps(dw, sw)
	for y, ty := range taps(dh, sh) {
		r0, r1 := src[int(ty.i0)*srcStride:][:sw], src[int(ty.i1)*srcStride:][:sw]
		wy := ty.w
		out := dst[y*dstStride:][:len(xs)]
		if sw == 1 {
			for x := range out {
				out[x] = byte((int32(r0[0])<<8 + (int32(r1[0])-int32(r0[0]))*wy + 1<<7) >> 8)
			}
			continue
		}
		for x, tx := range xs { // i1 is i0+1: one load a row
			p0, p1 := binary.LittleEndian.Uint16(r0[tx.i0:]), binary.LittleEndian.Uint16(r1[tx.i0:])
			a, c := int32(p0&0xff), int32(p1&0xff)
			top := a<<8 + (int32(p0>>8)-a)*tx.w // the two rows blended across, × 256
			bot := c<<8 + (int32(p1>>8)-c)*tx.w
			out[x] = byte((top<<8 + (bot-top)*wy + 1<<15) >> 16)
		}
	}
}

// scaleRGBA scales an RGBA image (alpha-premultiplied, as image.RGBA holds it) or an
// NRGBA one (not premultiplied) of sw × sh pixels, pix from its top-left pixel, to a
// w × h 4:2:0 YCbCr image, over white. Only the output's pixels are converted: each
// is the bilinear blend of the four source pixels around its centre, put over white,
// then turned into YCbCr as image/jpeg turns RGB (color.RGBToYCbCr for each pixel, a
// chroma sample the rounded mean of a 2 × 2 square's).
func scaleRGBA(pix []byte, stride, sw, sh int, premultiplied bool, w, h int) *image.YCbCr {
	dst := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	xs, ys := taps(w, sw), taps(h, sh)
	// The Cb and Cr of two rows of output pixels, for the chroma of 2 × 2 squares.
	cc := make([]int32, 4*w)
	cbA, crA, cbB, crB := cc[:w], cc[w:2*w], cc[2*w:3*w], cc[3*w:]
	for y := 0; y < h; y += 2 {
		blendRow(dst.Y[y*dst.YStride:y*dst.YStride+w], cbA, crA, pix, stride, xs, ys[y], premultiplied)
		cb1, cr1 := cbA, crA
		if y+1 < h {
			blendRow(dst.Y[(y+1)*dst.YStride:(y+1)*dst.YStride+w], cbB, crB, pix, stride, xs, ys[y+1], premultiplied)
			cb1, cr1 = cbB, crB
		}
		co := (y / 2) * dst.CStride
		for cx := range (w + 1) / 2 {
			x0, x1 := 2*cx, min(2*cx+1, w-1)
			dst.Cb[co+cx] = uint8((cbA[x0] + cbA[x1] + cb1[x0] + cb1[x1] + 2) >> 2)
			dst.Cr[co+cx] = uint8((crA[x0] + crA[x1] + cr1[x0] + cr1[x1] + 2) >> 2)
		}
	}
	return dst
}

// lanes spread a pixel's four bytes into 16-bit lanes of a uint64, so one multiply
// weighs all four channels; laneLo masks the lanes' low bytes, laneHalf is ½ in each
// lane.
const (
	laneLo   = 0x00ff00ff00ff00ff
	laneHalf = 0x0080008000800080
)

// spread puts the bytes of p (little-endian R, G, B, A) in the lanes of a uint64.
func spread(p uint32) uint64 {
	x := uint64(p)
	x = (x | x<<16) & 0x0000ffff0000ffff
	return (x | x<<8) & laneLo
}

// premultiply multiplies the colour lanes of a non-premultiplied pixel by its alpha.
func premultiply(p uint64) uint64 {
	a := p >> 48
	if a == 0xff {
		return p
	}
	c := p&0x0000ffffffffffff*a + laneHalf // each lane at most 255 × 255 + 128
	c = (c + (c>>8)&laneLo) >> 8 & laneLo  // c / 255, rounded
	return c | a<<48
}

// blendRow fills one output row: the Y of each pixel in y, its Cb and Cr in cb and cr.
// Weights are in 1/256ths, which keeps every lane of the blend under 65536. Where the
// four source pixels are one colour (the flat areas of a screenshot), that colour is
// taken as it is, and converted once for a run of such pixels.
func blendRow(y []byte, cb, cr []int32, pix []byte, stride int, xs []tap, ty tap, premultiplied bool) {
	r0, r1 := pix[int(ty.i0)*stride:], pix[int(ty.i1)*stride:]
	wy := uint64(ty.w)
	var flat uint32 // the colour of the last flat pixel, and its conversion
	var flatY uint8
	var flatCb, flatCr int32
	haveFlat := false
	for x, tx := range xs {
		var q00, q01, q10, q11 uint32
		if tx.i1 == tx.i0+1 { // two neighbours: one load a row
			u0, u1 := binary.LittleEndian.Uint64(r0[4*tx.i0:]), binary.LittleEndian.Uint64(r1[4*tx.i0:])
			q00, q01, q10, q11 = uint32(u0), uint32(u0>>32), uint32(u1), uint32(u1>>32)
		} else {
			q00, q01 = binary.LittleEndian.Uint32(r0[4*tx.i0:]), binary.LittleEndian.Uint32(r0[4*tx.i1:])
			q10, q11 = binary.LittleEndian.Uint32(r1[4*tx.i0:]), binary.LittleEndian.Uint32(r1[4*tx.i1:])
		}
		var p uint64
		if q00 == q01 && q00 == q10 && q00 == q11 {
			if haveFlat && q00 == flat {
				y[x], cb[x], cr[x] = flatY, flatCb, flatCr
				continue
			}
			p = spread(q00)
			if !premultiplied {
				p = premultiply(p)
			}
		} else {
			p00, p01, p10, p11 := spread(q00), spread(q01), spread(q10), spread(q11)
			if !premultiplied {
				p00, p01, p10, p11 = premultiply(p00), premultiply(p01), premultiply(p10), premultiply(p11)
			}
			wx := uint64(tx.w)
			top := (p00*(256-wx) + p01*wx + laneHalf) >> 8 & laneLo
			bot := (p10*(256-wx) + p11*wx + laneHalf) >> 8 & laneLo
			p = (top*(256-wy) + bot*wy + laneHalf) >> 8 & laneLo
		}
		// Over white: a premultiplied colour plus white times what alpha leaves.
		bg := 255 - int32(p>>48)
		r := min(int32(p)&0xff+bg, 255)
		g := min(int32(p>>16)&0xff+bg, 255)
		b := min(int32(p>>32)&0xff+bg, 255)
		// As color.RGBToYCbCr.
		yy := uint8((19595*r + 38470*g + 7471*b + 1<<15) >> 16)
		u := min(max((-11056*r-21712*g+32768*b+257<<15)>>16, 0), 255)
		v := min(max((32768*r-27440*g-5328*b+257<<15)>>16, 0), 255)
		y[x], cb[x], cr[x] = yy, u, v
		if q00 == q01 && q00 == q10 && q00 == q11 {
			flat, flatY, flatCb, flatCr, haveFlat = q00, yy, u, v, true
		}
	}
}
