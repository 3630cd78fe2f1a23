package imagepreview

import "image"

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

// scalePlane fills the dw × dh plane dst from the sw × sh plane src, each pixel the
// bilinear blend of the four source pixels around its centre (16.16 fixed point).
func scalePlane(dst []byte, dstStride, dw, dh int, src []byte, srcStride, sw, sh int) {
	if dw <= 0 || dh <= 0 || sw <= 0 || sh <= 0 {
		return
	}
	xs := make([]int32, dw) // source x of each column, 16.16
	for x := range dw {
		xs[x] = int32(max(0, ((2*x+1)*sw<<16/(2*dw))-1<<15))
	}
	for y := range dh {
		fy := max(0, ((2*y+1)*sh<<16/(2*dh))-1<<15)
		y0 := min(fy>>16, sh-1)
		y1 := min(y0+1, sh-1)
		wy := fy & 0xffff
		r0, r1 := src[y0*srcStride:], src[y1*srcStride:]
		out := dst[y*dstStride : y*dstStride+dw]
		for x, fx := range xs {
			x0 := min(int(fx>>16), sw-1)
			x1 := min(x0+1, sw-1)
			wx := int(fx & 0xffff)
			top := int(r0[x0])*(0x10000-wx) + int(r0[x1])*wx
			bot := int(r1[x0])*(0x10000-wx) + int(r1[x1])*wx
			out[x] = byte(((top>>8)*(0x10000-wy)>>8 + (bot>>8)*wy>>8 + 0x7fff) >> 16)
		}
	}
}
