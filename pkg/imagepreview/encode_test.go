package imagepreview

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"testing"
)

// randomYCbCr is a 4:2:0 image of noise (every coefficient busy) with, on its left,
// a black and white stripe pattern (the largest coefficients there are) and, on its
// right, flat areas of black, white and grey (blocks of one value).
func randomYCbCr(rng *rand.Rand, w, h int) *image.YCbCr {
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	for i := range m.Y {
		x, y := i%m.YStride, i/m.YStride
		switch {
		case x < w/3:
			m.Y[i] = uint8(255 * (x & 1))
		case x >= 2*w/3:
			m.Y[i] = [3]uint8{0, 255, 77}[y*3/h]
		default:
			m.Y[i] = uint8(rng.IntN(256))
		}
	}
	for i := range m.Cb {
		m.Cb[i], m.Cr[i] = uint8(rng.IntN(256)), uint8(rng.IntN(256))
		if x, y := i%m.CStride, i/m.CStride; x >= m.CStride/2 {
			m.Cb[i], m.Cr[i] = [3]uint8{0, 255, 128}[y*3/((h+1)/2)], [3]uint8{255, 0, 90}[y*3/((h+1)/2)]
		}
	}
	return m
}

// TestEncodeJPEGMatchesStandardLibrary: encodeJPEG writes the bytes image/jpeg.Encode
// writes for the same 4:2:0 image, at every size that ends mid-block and at qualities
// from 1 to 100.
func TestEncodeJPEGMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []image.Point{{1, 1}, {2, 3}, {7, 5}, {8, 8}, {16, 16}, {17, 9}, {33, 31}, {130, 67}, {301, 250}} {
		for _, q := range []int{0, 1, 10, 50, 82, 95, 100, 120} {
			t.Run(fmt.Sprintf("%dx%d q%d", size.X, size.Y, q), func(t *testing.T) {
				m := randomYCbCr(rng, size.X, size.Y)
				var want bytes.Buffer
				if err := jpeg.Encode(&want, m, &jpeg.Options{Quality: q}); err != nil {
					t.Fatal(err)
				}
				if got := encodeJPEG(nil, m, q); !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("%d bytes, image/jpeg wrote %d; first difference at %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestQuantize: the reciprocal gives image/jpeg's rounded division for every divisor
// (8 × 1 … 8 × 255) and every value the DCT can give.
func TestQuantize(t *testing.T) {
	div := func(a, b int32) int32 { // image/jpeg's
		if a >= 0 {
			return (a + (b >> 1)) / b
		}
		return -((-a + (b >> 1)) / b)
	}
	for q := 1; q <= 255; q++ {
		d := uint64(8 * q)
		rcp, half := (1<<32+d-1)/d, int32(d>>1)
		for a := int32(-1 << 14); a <= 1<<14; a++ {
			if got, want := quantize(a, rcp, half), div(a, int32(d)); got != want {
				t.Fatalf("%d / %d: %d, want %d", a, d, got, want)
			}
		}
	}
}

// TestScaleRGBAConvertsAsImageJPEG: an opaque RGBA image at its own size comes out of
// scaleRGBA as image/jpeg converts it: encoding the result writes the file
// image/jpeg.Encode writes for the RGBA image.
func TestScaleRGBAConvertsAsImageJPEG(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []image.Point{{1, 1}, {5, 3}, {37, 23}, {64, 48}} {
		t.Run(fmt.Sprintf("%dx%d", size.X, size.Y), func(t *testing.T) {
			m := image.NewRGBA(image.Rect(0, 0, size.X, size.Y))
			for i := range m.Pix {
				m.Pix[i] = uint8(rng.IntN(256))
				if i%4 == 3 {
					m.Pix[i] = 255
				}
			}
			var want bytes.Buffer
			if err := jpeg.Encode(&want, m, &jpeg.Options{Quality: 90}); err != nil {
				t.Fatal(err)
			}
			ycc := scaleRGBA(m.Pix, m.Stride, size.X, size.Y, true, size.X, size.Y)
			if got := encodeJPEG(nil, ycc, 90); !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("differs from image/jpeg at byte %d", firstDiff(got, want.Bytes()))
			}
		})
	}
}

// TestPremultiply: c × a / 255, rounded, in every lane, for every colour and alpha.
func TestPremultiply(t *testing.T) {
	for a := range uint64(256) {
		for c := range uint64(256) {
			p := premultiply(a<<48 | c<<32 | (255-c)<<16 | c)
			want := func(c uint64) uint64 { return (c*a + 127) / 255 }
			if p>>48 != a || p>>32&0xffff != want(c) || p>>16&0xffff != want(255-c) || p&0xffff != want(c) {
				t.Fatalf("premultiply(%d, alpha %d) = %016x", c, a, p)
			}
		}
	}
}

// BenchmarkEncode: a preview of a photo (gradients with grain, as shipbench's preview
// row makes them), 1024 × 768, encoded by image/jpeg and by encodeJPEG.
func BenchmarkEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 11))
	src := image.NewRGBA(image.Rect(0, 0, 2000, 1500))
	for y := range 1500 {
		for x := range 2000 {
			n := uint8(rng.IntN(24))
			src.SetRGBA(x, y, color.RGBA{uint8(x/10) + n, uint8(y*200/1500) + n, uint8((x+y)*100/3500) + n, 255})
		}
	}
	var f bytes.Buffer
	if err := jpeg.Encode(&f, src, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	img, err := jpeg.Decode(&f)
	if err != nil {
		b.Fatal(err)
	}
	m := scale(img, 1024)
	b.Run("image/jpeg", func(b *testing.B) {
		for b.Loop() {
			_ = jpeg.Encode(&bytes.Buffer{}, m, &jpeg.Options{Quality: 82})
		}
	})
	b.Run("encodeJPEG", func(b *testing.B) {
		for b.Loop() {
			encodeJPEG(nil, m, 82)
		}
	})
}
