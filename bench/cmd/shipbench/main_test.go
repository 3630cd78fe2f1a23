package main

import "testing"

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1GiB": 1 << 30, "16MiB": 16 << 20, "512KiB": 512 << 10, "4096": 4096, "10B": 10} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
		if b.String() == "" {
			t.Errorf("String of %q is empty", in)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "1TB", "x"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
}

func TestIntList(t *testing.T) {
	var l intList
	if err := l.Set("1, 2,4"); err != nil || l.String() != "1,2,4" {
		t.Errorf("Set = %v, %v", l, err)
	}
	if err := l.Set("1,0"); err == nil {
		t.Error("0 accepted")
	}
}
