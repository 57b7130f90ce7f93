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
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !isAlnum(c) && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
