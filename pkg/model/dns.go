package model

import (
	"fmt"
	"net/netip"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

func (d *derived) setDNS(dns downwardapi.DNS, f ifaceFailer) error {
	seen := map[netip.Addr]bool{}
	for i, s := range dns.Nameservers {
		a, err := netval.ParseUnicast(s)
		if err != nil {
			return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("dns.nameservers[%d]", i), err)
		}
		if !seen[a] {
			seen[a] = true
			d.DNS.Nameservers = append(d.DNS.Nameservers, a)
		}
	}
	seenSearch := map[string]bool{}
	for i, s := range dns.Search {
		if !netval.ValidDNSName(s) {
			return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("dns.search[%d]", i), fmt.Errorf("invalid domain %s", netval.Quote(s)))
		}
		if !seenSearch[s] {
			seenSearch[s] = true
			d.DNS.Search = append(d.DNS.Search, s)
		}
	}
	if dns.Domain != "" && !netval.ValidDNSName(dns.Domain) {
		return f.fail(downwardapi.NetworkStatusAnnotation, "dns.domain", fmt.Errorf("invalid domain %s", netval.Quote(dns.Domain)))
	}
	d.DNS.Domain = dns.Domain
	return nil
}
