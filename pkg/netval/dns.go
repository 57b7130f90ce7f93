package netval

import "strings"

// MaxDNSName is the longest domain name, without the trailing dot (RFC 1035 section 2.3.4).
const MaxDNSName = 253

// ValidDNSName accepts a resolv.conf-safe domain: labels of letters, digits, '-' and '_' (used in
// SRV-style names), at most 63 bytes each and 253 in all, optionally ending in a dot.
func ValidDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > MaxDNSName {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.IndexFunc(label, func(r rune) bool { return !isAlnum(r) && r != '-' && r != '_' }) >= 0 {
			return false
		}
	}
	return true
}

func isAlnum(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}
