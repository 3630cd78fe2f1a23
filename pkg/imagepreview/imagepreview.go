// Package imagepreview draws the preview of an image: a JPEG that fits a square of a
// given side. It reads the image's header first and decodes nothing of an image whose
// declared dimensions are over a pixel limit, so a decompression bomb (a small file
// declaring billions of pixels) costs a header read. PNG, JPEG, GIF and WebP are read.
package imagepreview

import (
	"bufio"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	_ "image/gif"  // GIF decoder
	_ "image/jpeg" // JPEG decoder
	_ "image/png"  // PNG decoder
	"io"

	xdraw "golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // WebP decoder
)

// ErrNotImage: the bytes are not a PNG, JPEG, GIF or WebP image (or a broken one).
var ErrNotImage = errors.New("imagepreview: not a PNG, JPEG, GIF or WebP image")

// ErrTooLarge: the image's declared dimensions are over the pixel limit.
var ErrTooLarge = errors.New("imagepreview: image over the pixel limit")

// Options bound a preview.
type Options struct {
	MaxPixels int64 // width × height the header may declare
	MaxSide   int   // the preview's longer side, at most
	Quality   int   // JPEG quality, 1-100
}

// Render reads an image from r, at its start, and returns its preview as a JPEG and
// the preview's size. r is read twice: the header, then (rewound) the image.
func Render(r io.ReadSeeker, o Options) (jpg []byte, width, height int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	cfg, format, err := image.DecodeConfig(br)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	if !Checked(cfg, o.MaxPixels) {
		return nil, 0, 0, fmt.Errorf("%w: %s of %d × %d", ErrTooLarge, format, cfg.Width, cfg.Height)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, 0, 0, err
	}
	br.Reset(r)
	img, _, err := image.Decode(br)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	// The header was checked, but the decoded image is what counts.
	if b := img.Bounds(); !Checked(image.Config{Width: b.Dx(), Height: b.Dy()}, o.MaxPixels) {
		return nil, 0, 0, ErrTooLarge
	}
	small := scale(img, o.MaxSide)
	w, h := small.Rect.Dx(), small.Rect.Dy()
	return encodeJPEG(make([]byte, 0, w*h/4+1024), small, o.Quality), w, h, nil
}

// Checked says whether an image of cfg's dimensions may be decoded: positive and at
// most maxPixels in all.
func Checked(cfg image.Config, maxPixels int64) bool {
	w, h := int64(cfg.Width), int64(cfg.Height)
	return w > 0 && h > 0 && w <= maxPixels && h <= maxPixels && w*h <= maxPixels
}

// opaque is what an image that knows it has no transparent pixel says.
type opaque interface{ Opaque() bool }

// Scale returns img fitted within maxSide × maxSide (never enlarged) as a 4:2:0 YCbCr
// image, which the JPEG encoder takes without converting; transparent pixels come out
// white, as a JPEG has none. A JPEG's YCbCr image is scaled plane by plane
// (scaleYCbCr); an RGBA or NRGBA image (a PNG's) is converted while it is scaled, only
// the output's pixels (scaleRGBA); any other is drawn at the output size first.
func Scale(img image.Image, maxSide int) image.Image {
	return scale(img, maxSide)
}

// scale is Scale, typed for encodeJPEG.
func scale(img image.Image, maxSide int) *image.YCbCr {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w > maxSide || h > maxSide {
		if w >= h {
			w, h = maxSide, max(1, h*maxSide/w)
		} else {
			w, h = max(1, w*maxSide/h), maxSide
		}
	}
	if w <= 0 || h <= 0 {
		return image.NewYCbCr(image.Rectangle{}, image.YCbCrSubsampleRatio420)
	}
	switch m := img.(type) {
	case *image.YCbCr:
		return scaleYCbCr(m, w, h)
	case *image.RGBA:
		return scaleRGBA(m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, b.Dx(), b.Dy(), true, w, h)
	case *image.NRGBA:
		return scaleRGBA(m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, b.Dx(), b.Dy(), false, w, h)
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	if o, ok := img.(opaque); ok && o.Opaque() {
		xdraw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, xdraw.Src, nil)
	} else {
		draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		xdraw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, xdraw.Over, nil)
	}
	return scaleRGBA(dst.Pix, dst.Stride, w, h, true, w, h)
}
