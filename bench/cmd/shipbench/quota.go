package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// The upload and API rows are measured a second time on the same gateway "with a quota":
// while the gateway measures that side, the default policy (docs/POLICIES.md) is
// quotaPolicy, and between its runs or slices it is the policy with no limits, so each
// side of the comparison sees the same gateway, database and machine. The bench's admin
// is in no group: the default policy is theirs.

// quotaPolicy is the default policy of the "with a quota" sides: a storage quota no run
// comes near and size limits above the row's files, so that every upload reserves its
// bytes as they stream and every check of a creation runs, and nothing is refused. It
// sets no max_active_packages: that limit serialises one user's creations by design
// (docs/POLICIES.md), which is not the cost of a quota.
func quotaPolicy(fileSize int64) map[string]any {
	return map[string]any{
		"storage_quota_bytes": int64(1) << 50,
		"max_file_size":       2 * fileSize,
		"max_package_size":    4 * fileSize,
		"max_ttl_days":        90,
	}
}

// quotaPolicyText describes quotaPolicy in a row.
func quotaPolicyText(fileSize int64) string {
	return fmt.Sprintf("default policy: storage_quota_bytes 1 PiB, max_file_size %s, max_package_size %s, max_ttl_days 90",
		formatSize(2*fileSize), formatSize(4*fileSize))
}

// putDefaultPolicy sets the default policy through the API (nil: every limit off).
func putDefaultPolicy(ctx context.Context, api *rig.Client, pol map[string]any) error {
	if pol == nil {
		pol = map[string]any{}
	}
	a, err := api.Do(ctx, http.MethodPut, "/api/v1/admin/policies/default", pol)
	if err != nil {
		return fmt.Errorf("PUT /api/v1/admin/policies/default: %w", err)
	}
	if a.Status != http.StatusOK {
		return fmt.Errorf("PUT /api/v1/admin/policies/default answered %s", a)
	}
	return nil
}

// withQuota runs fn with quotaPolicy(fileSize) as the default policy, and then puts back
// the policy with no limits (also when ctx has ended).
func withQuota(ctx context.Context, api *rig.Client, fileSize int64, fn func()) error {
	if err := putDefaultPolicy(ctx, api, quotaPolicy(fileSize)); err != nil {
		return err
	}
	fn()
	return putDefaultPolicy(context.WithoutCancel(ctx), api, nil)
}

// pairedRatio is the median of quota[i]/plain[i] over the pairs of runs or slices that
// took turns: each pair saw the machine of its moment, where the ratio of the totals
// also carries the load that other work put on the machine in some slices and not in
// others. It returns the ratio and how many pairs it had.
func pairedRatio(quota, plain []float64) (float64, int) {
	var rs []float64
	for i := range min(len(quota), len(plain)) {
		if plain[i] > 0 {
			rs = append(rs, quota[i]/plain[i])
		}
	}
	return rig.Median(rs), len(rs)
}

// sliceRatios lists quota[i]/plain[i] for the raw figures.
func sliceRatios(quota, plain []float64) string {
	var parts []string
	for i := range min(len(quota), len(plain)) {
		parts = append(parts, ratio(quota[i], plain[i]))
	}
	return strings.Join(parts, " ")
}
