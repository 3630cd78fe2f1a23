package policies

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shipfile/shipfile/pkg/bytesize"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Effective is the policy of a user in the groups whose policies are given: limit by
// limit the most generous of them, or def when the user is in no group.
func Effective(groups []Policy, def Policy) Policy {
	if len(groups) == 0 {
		return def
	}
	out := groups[0]
	out.AllowedRecipientDomains = slices.Clone(out.AllowedRecipientDomains)
	for _, g := range groups[1:] {
		out.StorageQuotaBytes = larger(out.StorageQuotaBytes, g.StorageQuotaBytes)
		out.MaxFileSize = larger(out.MaxFileSize, g.MaxFileSize)
		out.MaxPackageSize = larger(out.MaxPackageSize, g.MaxPackageSize)
		out.MaxTTLDays = larger(out.MaxTTLDays, g.MaxTTLDays)
		out.MaxActivePackages = larger(out.MaxActivePackages, g.MaxActivePackages)
		out.MaxDownloadsCeiling = larger(out.MaxDownloadsCeiling, g.MaxDownloadsCeiling)
		out.RequirePassword = required(out.RequirePassword, g.RequirePassword)
		out.RequireEncryption = required(out.RequireEncryption, g.RequireEncryption)
		out.MayRequestFiles = allowed(out.MayRequestFiles, g.MayRequestFiles)
		if len(out.AllowedRecipientDomains) == 0 || len(g.AllowedRecipientDomains) == 0 {
			out.AllowedRecipientDomains = nil
		} else {
			for _, d := range g.AllowedRecipientDomains {
				if !slices.Contains(out.AllowedRecipientDomains, d) {
					out.AllowedRecipientDomains = append(out.AllowedRecipientDomains, d)
				}
			}
		}
	}
	return out
}

// larger is the more generous of two limits: nil (none) wins, else the larger.
func larger[T int | int64](a, b *T) *T {
	if a == nil || b == nil {
		return nil
	}
	if *b > *a {
		return b
	}
	return a
}

// required is a requirement that holds only when both hold.
func required(a, b *bool) *bool {
	if a != nil && *a && b != nil && *b {
		return a
	}
	if a == nil || b == nil {
		return nil
	}
	f := false
	return &f
}

// allowed is a permission either grants (nil grants it).
func allowed(a, b *bool) *bool {
	if a == nil || *a {
		return a
	}
	return b
}

// Validate checks the limits of a policy an admin sets.
func Validate(p Policy) error {
	for name, v := range map[string]*int64{"storage_quota_bytes": p.StorageQuotaBytes, "max_file_size": p.MaxFileSize, "max_package_size": p.MaxPackageSize} {
		if v != nil && *v < 0 {
			return app.Invalid("policy: %s must be 0 or more", name)
		}
	}
	if p.MaxTTLDays != nil && (*p.MaxTTLDays < app.MinTTLDays || *p.MaxTTLDays > app.MaxTTLDays) {
		return app.Invalid("policy: max_ttl_days must be between %d and %d", app.MinTTLDays, app.MaxTTLDays)
	}
	if p.MaxActivePackages != nil && *p.MaxActivePackages < 0 {
		return app.Invalid("policy: max_active_packages must be 0 or more")
	}
	if p.MaxDownloadsCeiling != nil && *p.MaxDownloadsCeiling < 1 {
		return app.Invalid("policy: max_downloads_ceiling must be 1 or more")
	}
	for _, d := range p.AllowedRecipientDomains {
		if !isDomain(d) {
			return app.Invalid("policy: allowed_recipient_domains: %q is not a domain", d)
		}
	}
	return nil
}

// isDomain accepts what may be the domain of an e-mail address: 1 to 253 bytes of
// valid UTF-8 (internationalized names are letters too), without "@", spaces, control
// or format characters.
func isDomain(d string) bool {
	return d != "" && len(d) <= 253 && utf8.ValidString(d) && !strings.ContainsFunc(d, func(r rune) bool {
		return r == '@' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	})
}

// Normalize lower-cases the domains and drops repeats.
func Normalize(p Policy) Policy {
	var ds []string
	for _, d := range p.AllowedRecipientDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	p.AllowedRecipientDomains = ds
	return p
}

// PackageTerms is what the rules of a policy look at in a package.
type PackageTerms struct {
	Inbound      bool
	TTLDays      int
	MaxDownloads *int
	HasPassword  bool
	Encrypted    bool
	Recipients   []string // e-mail addresses
}

// TermsOf returns the terms of p.
func TermsOf(p app.Package) PackageTerms {
	t := PackageTerms{Inbound: p.Direction == app.Inbound, TTLDays: p.TTLDays, MaxDownloads: p.MaxDownloads,
		HasPassword: len(p.PasswordHash) > 0, Encrypted: p.Encrypted()}
	for _, r := range p.Recipients {
		t.Recipients = append(t.Recipients, r.Email)
	}
	if len(t.Recipients) == 0 && p.RecipientEmail != "" {
		t.Recipients = []string{p.RecipientEmail}
	}
	return t
}

// CheckPackage checks a package's terms against the rules of pol: an *app.Error of
// KindInvalid (422) naming the first rule broken, or nil.
func CheckPackage(pol Policy, t PackageTerms) error {
	if t.Inbound && pol.MayRequestFiles != nil && !*pol.MayRequestFiles {
		return app.Invalid("may_request_files: your policy does not allow requesting files")
	}
	if pol.MaxTTLDays != nil && t.TTLDays > *pol.MaxTTLDays {
		return app.Invalid("max_ttl_days: ttl_days is %d, your policy allows at most %d", t.TTLDays, *pol.MaxTTLDays)
	}
	if pol.MaxDownloadsCeiling != nil && !t.Inbound {
		if t.MaxDownloads == nil {
			return app.Invalid("max_downloads_ceiling: your policy requires max_downloads, at most %d", *pol.MaxDownloadsCeiling)
		}
		if *t.MaxDownloads > *pol.MaxDownloadsCeiling {
			return app.Invalid("max_downloads_ceiling: max_downloads is %d, your policy allows at most %d", *t.MaxDownloads, *pol.MaxDownloadsCeiling)
		}
	}
	if pol.RequirePassword != nil && *pol.RequirePassword && !t.HasPassword && !t.Inbound {
		return app.Invalid("require_password: your policy requires a password on the link")
	}
	if pol.RequireEncryption != nil && *pol.RequireEncryption && !t.Encrypted {
		return app.Invalid("require_encryption: your policy requires end-to-end encryption (encryption: age)")
	}
	for _, e := range t.Recipients {
		if err := CheckRecipient(pol, e); err != nil {
			return err
		}
	}
	return nil
}

// CheckRecipient checks a recipient's address against allowed_recipient_domains.
func CheckRecipient(pol Policy, email string) error {
	if len(pol.AllowedRecipientDomains) == 0 {
		return nil
	}
	at := strings.LastIndexByte(email, '@')
	domain := strings.ToLower(email[at+1:])
	if slices.Contains(pol.AllowedRecipientDomains, domain) {
		return nil
	}
	return app.Invalid("allowed_recipient_domains: %s is not in %s", domain, strings.Join(pol.AllowedRecipientDomains, ", "))
}

// CheckActive checks that a user with active packages in draft or active may open one
// more: KindInvalid (422) naming max_active_packages and the numbers.
func CheckActive(pol Policy, active int) error {
	if pol.MaxActivePackages != nil && active >= *pol.MaxActivePackages {
		return app.Invalid("max_active_packages: %d of %d packages in draft or active, delete or let one expire first", active, *pol.MaxActivePackages)
	}
	return nil
}

// CheckFileSize checks a file of size bytes (its length, or what has arrived of it)
// against max_file_size, and a package that holds packageSize bytes before it against
// max_package_size: KindTooLarge (413) with the numbers.
func CheckFileSize(pol Policy, size, packageSize int64) error {
	if pol.MaxFileSize != nil && size > *pol.MaxFileSize {
		return tooLarge("max_file_size: this file is %s, your policy allows at most %s a file", bytesize.IEC(size), bytesize.IEC(*pol.MaxFileSize))
	}
	if pol.MaxPackageSize != nil && packageSize+size > *pol.MaxPackageSize {
		return tooLarge("max_package_size: the package holds %s of %s, this file needs %s", bytesize.IEC(packageSize), bytesize.IEC(*pol.MaxPackageSize), bytesize.IEC(size))
	}
	return nil
}

// QuotaError is the 413 of a reservation that does not fit: the limit (storage quota
// or the storage cap) and the numbers.
func QuotaError(limit string, held, quota, need int64) error {
	return tooLarge("%s: %s of %s used, this file needs %s", limit, bytesize.IEC(held), bytesize.IEC(quota), bytesize.IEC(need))
}

// The names of the byte limits in QuotaError.
const (
	LimitQuota = "storage quota"
	LimitCap   = "storage cap"
)

func tooLarge(format string, args ...any) error {
	return &app.Error{Kind: app.KindTooLarge, Detail: fmt.Sprintf(format, args...)}
}

// NearlyFull reports whether held bytes reach 90 % of quota (nil: no quota).
func NearlyFull(quota *int64, held int64) bool {
	return quota != nil && *quota > 0 && held*10 >= *quota*9
}
