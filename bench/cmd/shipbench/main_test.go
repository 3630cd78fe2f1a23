package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

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

func TestBudgetFlag(t *testing.T) {
	var b budgetFlag
	if err := b.Set("api=3m, dispatch=8m"); err != nil {
		t.Fatal(err)
	}
	if err := b.Set("upload=5m"); err != nil { // a row of a group: the group's budget
		t.Fatal(err)
	}
	if b["api"] != 3*time.Minute || b["dispatch"] != 8*time.Minute || b["transfer"] != 5*time.Minute || len(b) != 3 {
		t.Errorf("budgets = %v", b)
	}
	if got := b.String(); got != "api=3m0s,dispatch=8m0s,transfer=5m0s" {
		t.Errorf("String() = %q", got)
	}
	// Every row and group has a budget of its own to set.
	for _, row := range allRows {
		var one budgetFlag
		if err := one.Set(row + "=1m"); err != nil {
			t.Errorf("Set(%s=1m): %v", row, err)
		} else if _, ok := budgets[groupOf[row]]; !ok {
			t.Errorf("row %s maps to group %q, which has no budget", row, groupOf[row])
		}
	}
	for _, in := range []string{"", "api", "api=", "api=-1m", "api=soon", "nope=1m", "=1m"} {
		var b budgetFlag
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
}

func TestPrebuilt(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"gateway": 0o755, "shipctl": 0o755, "webhooks": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	bins, err := prebuilt(dir, []string{"gateway", "shipctl"})
	if err != nil || bins.Path["gateway"] != filepath.Join(dir, "gateway") || bins.Path["shipctl"] != filepath.Join(dir, "shipctl") {
		t.Errorf("prebuilt = %v, %v", bins, err)
	}
	for _, names := range [][]string{{"gateway", "webhooks"}, {"expiry"}} {
		if _, err := prebuilt(dir, names); err == nil {
			t.Errorf("prebuilt(%v) accepted a missing or non-executable binary", names)
		}
	}
}
