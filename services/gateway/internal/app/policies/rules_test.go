package policies

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func i64(n int64) *int64 { return &n }
func iv(n int) *int      { return &n }
func bv(b bool) *bool    { return &b }

func TestEffective(t *testing.T) {
	def := Policy{StorageQuotaBytes: i64(10)}
	tests := []struct {
		name   string
		groups []Policy
		want   Policy
	}{
		{"no group: the default", nil, def},
		{"one group: its own, not the default's", []Policy{{MaxTTLDays: iv(7)}}, Policy{MaxTTLDays: iv(7)}},
		{"the larger number", []Policy{{StorageQuotaBytes: i64(5), MaxTTLDays: iv(7)}, {StorageQuotaBytes: i64(9), MaxTTLDays: iv(3)}},
			Policy{StorageQuotaBytes: i64(9), MaxTTLDays: iv(7)}},
		{"null wins over a number", []Policy{{StorageQuotaBytes: i64(5), MaxFileSize: i64(1)}, {MaxFileSize: i64(2)}},
			Policy{MaxFileSize: i64(2)}},
		{"required only when all require", []Policy{{RequirePassword: bv(true), RequireEncryption: bv(true)}, {RequirePassword: bv(true)}},
			Policy{RequirePassword: bv(true)}},
		{"may request when any may", []Policy{{MayRequestFiles: bv(false)}, {MayRequestFiles: bv(true)}}, Policy{MayRequestFiles: bv(true)}},
		{"may not when all may not", []Policy{{MayRequestFiles: bv(false)}, {MayRequestFiles: bv(false)}}, Policy{MayRequestFiles: bv(false)}},
		{"domains: the union", []Policy{{AllowedRecipientDomains: []string{"a.example"}}, {AllowedRecipientDomains: []string{"b.example", "a.example"}}},
			Policy{AllowedRecipientDomains: []string{"a.example", "b.example"}}},
		{"domains: any when one allows any", []Policy{{AllowedRecipientDomains: []string{"a.example"}}, {}}, Policy{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Effective(tc.groups, def)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckPackage(t *testing.T) {
	base := PackageTerms{TTLDays: 7, Recipients: []string{"bob@corp.example"}}
	tests := []struct {
		name  string
		pol   Policy
		terms func(PackageTerms) PackageTerms
		want  string // the detail's start; "" for no error
	}{
		{"no policy", Policy{}, nil, ""},
		{"ttl over", Policy{MaxTTLDays: iv(3)}, nil, "max_ttl_days: ttl_days is 7, your policy allows at most 3"},
		{"ttl at", Policy{MaxTTLDays: iv(7)}, nil, ""},
		{"downloads unset", Policy{MaxDownloadsCeiling: iv(5)}, nil, "max_downloads_ceiling: your policy requires max_downloads, at most 5"},
		{"downloads over", Policy{MaxDownloadsCeiling: iv(5)}, func(t PackageTerms) PackageTerms { t.MaxDownloads = iv(6); return t },
			"max_downloads_ceiling: max_downloads is 6, your policy allows at most 5"},
		{"downloads at", Policy{MaxDownloadsCeiling: iv(5)}, func(t PackageTerms) PackageTerms { t.MaxDownloads = iv(5); return t }, ""},
		{"password missing", Policy{RequirePassword: bv(true)}, nil, "require_password"},
		{"password set", Policy{RequirePassword: bv(true)}, func(t PackageTerms) PackageTerms { t.HasPassword = true; return t }, ""},
		{"password not required (false)", Policy{RequirePassword: bv(false)}, nil, ""},
		{"encryption missing", Policy{RequireEncryption: bv(true)}, nil, "require_encryption"},
		{"encryption set", Policy{RequireEncryption: bv(true)}, func(t PackageTerms) PackageTerms { t.Encrypted = true; return t }, ""},
		{"domain not allowed", Policy{AllowedRecipientDomains: []string{"partner.example"}}, nil,
			"allowed_recipient_domains: corp.example is not in partner.example"},
		{"domain allowed, any case", Policy{AllowedRecipientDomains: []string{"corp.example"}},
			func(t PackageTerms) PackageTerms { t.Recipients = []string{"Bob@CORP.example"}; return t }, ""},
		{"second recipient not allowed", Policy{AllowedRecipientDomains: []string{"corp.example"}},
			func(t PackageTerms) PackageTerms {
				t.Recipients = []string{"a@corp.example", "b@evil.example"}
				return t
			},
			"allowed_recipient_domains: evil.example"},
		{"request forbidden", Policy{MayRequestFiles: bv(false)}, func(t PackageTerms) PackageTerms { t.Inbound = true; return t },
			"may_request_files"},
		{"send allowed when requests are not", Policy{MayRequestFiles: bv(false)}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			terms := base
			if tc.terms != nil {
				terms = tc.terms(terms)
			}
			err := CheckPackage(tc.pol, terms)
			checkErr(t, err, app.KindInvalid, tc.want)
		})
	}
}

func checkErr(t *testing.T, err error, kind app.Kind, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("err = %v, want none", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if app.KindOf(err) != kind {
		t.Fatalf("kind %v, want %v (%v)", app.KindOf(err), kind, err)
	}
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("detail %q, want it to start with %q", got, want)
	}
}

func TestSizes(t *testing.T) {
	const gib = 1 << 30
	t.Run("quota message", func(t *testing.T) {
		err := QuotaError(LimitQuota, 96*gib/10, 10*gib, 12*gib/10)
		checkErr(t, err, app.KindTooLarge, "storage quota: 9.6 GiB of 10 GiB used, this file needs 1.2 GiB")
	})
	t.Run("file over", func(t *testing.T) {
		checkErr(t, CheckFileSize(Policy{MaxFileSize: i64(1024)}, 2048, 0), app.KindTooLarge,
			"max_file_size: this file is 2 KiB, your policy allows at most 1 KiB a file")
	})
	t.Run("file at", func(t *testing.T) { checkErr(t, CheckFileSize(Policy{MaxFileSize: i64(1024)}, 1024, 0), 0, "") })
	t.Run("package over", func(t *testing.T) {
		checkErr(t, CheckFileSize(Policy{MaxPackageSize: i64(100)}, 60, 50), app.KindTooLarge,
			"max_package_size: the package holds 50 B of 100 B, this file needs 60 B")
	})
	t.Run("active", func(t *testing.T) {
		checkErr(t, CheckActive(Policy{MaxActivePackages: iv(2)}, 2), app.KindInvalid, "max_active_packages: 2 of 2")
		checkErr(t, CheckActive(Policy{MaxActivePackages: iv(2)}, 1), 0, "")
	})
	t.Run("nearly full", func(t *testing.T) {
		if NearlyFull(nil, 100) || NearlyFull(i64(100), 89) || !NearlyFull(i64(100), 90) {
			t.Fatal("90 % mark misplaced")
		}
	})
	t.Run("validate", func(t *testing.T) {
		checkErr(t, Validate(Policy{MaxTTLDays: iv(0)}), app.KindInvalid, "policy: max_ttl_days")
		checkErr(t, Validate(Policy{StorageQuotaBytes: i64(-1)}), app.KindInvalid, "policy: storage_quota_bytes")
		checkErr(t, Validate(Policy{AllowedRecipientDomains: []string{"a@b"}}), app.KindInvalid, "policy: allowed_recipient_domains")
		checkErr(t, Validate(Policy{StorageQuotaBytes: i64(0), MaxTTLDays: iv(90)}), 0, "")
	})
}
