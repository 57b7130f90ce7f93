package domain

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// The domain edit two ways, on every domain at hand: Apply (the splicer) against the edit of KubeVirt's
// passt sidecar (libvirtxml.Domain unmarshal, replace our hostdevs by alias, marshal). The domains are
// this package's KubeVirt-shaped one, KubeVirt's own test domains from the module cache, and, when
// SRIOV_UDN_DOMAIN_RECORD_DIR is set, every OnDefineDomain input that make test-integration and
// test-guest recorded there (each with the interfaces read back from the recorded output). doc.go
// gives the verdict; docs/footprint.md the figures.

// recordDirEnv is test/internal/harness RecordDirEnv.
const recordDirEnv = "SRIOV_UDN_DOMAIN_RECORD_DIR"

type corpusDomain struct {
	name   string
	src    []byte
	ifaces []model.BoundInterface
	want   []byte // the sidecar's recorded output, when there is one
}

func editCorpus(t testing.TB) []corpusDomain {
	t.Helper()
	undeclared := strings.Replace(kubevirtDomain, ` xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"`, "", 1)
	corpus := []corpusDomain{
		{name: "pkg/domain kubevirtDomain", src: []byte(kubevirtDomain), ifaces: []model.BoundInterface{udnIface()}},
		{name: "pkg/domain kubevirtDomain, qemu: resent undeclared", src: []byte(undeclared), ifaces: []model.BoundInterface{udnIface()}},
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "kubevirt.io/kubevirt")
	list.Env = append(os.Environ(), "GOPROXY=off") // the module cache's copy or nothing
	if out, err := list.Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		dir := filepath.Join(strings.TrimSpace(string(out)), "pkg")
		files, _ := filepath.Glob(filepath.Join(dir, "virt-launcher/virtwrap/*/testdata/domain_*.xml.tmpl"))
		files = append(files, filepath.Join(dir, "virt-launcher/virtwrap/testdata/migration_domain.xml"),
			filepath.Join(dir, "hooks/testdata/domain.xml")) // what KubeVirt's hook Manager tests send to sidecars
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			// The templates' slot for a test's extra devices, in either template syntax, left empty.
			src := bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("%s"), nil), []byte("{{ . }}"), nil)
			rel, _ := filepath.Rel(dir, f)
			corpus = append(corpus, corpusDomain{name: "kubevirt " + rel, src: src, ifaces: []model.BoundInterface{udnIface()}})
		}
	}
	if dir := os.Getenv(recordDirEnv); dir != "" {
		ins, err := filepath.Glob(filepath.Join(dir, "*.in.xml"))
		require.NoError(t, err)
		for _, in := range ins {
			src, err := os.ReadFile(in)
			require.NoError(t, err)
			want, err := os.ReadFile(strings.TrimSuffix(in, ".in.xml") + ".out.xml")
			require.NoError(t, err)
			corpus = append(corpus, corpusDomain{
				name: "recorded " + strings.TrimSuffix(filepath.Base(in), ".in.xml"), src: src, want: want,
				ifaces: recordedInterfaces(t, want),
			})
		}
	}
	return corpus
}

// recordedInterfaces reads our hostdevs back from a recorded output as the interfaces that made them.
func recordedInterfaces(t testing.TB, out []byte) []model.BoundInterface {
	var d struct {
		Hostdevs []struct {
			Alias struct {
				Name string `xml:"name,attr"`
			} `xml:"alias"`
			Source struct {
				Address libvirtxml.DomainAddressPCI `xml:"address"`
			} `xml:"source"`
			Boot *struct {
				Order uint `xml:"order,attr"`
			} `xml:"boot"`
			Address *libvirtxml.DomainAddressPCI `xml:"address"`
		} `xml:"devices>hostdev"`
	}
	require.NoError(t, xml.Unmarshal(out, &d))
	var ifaces []model.BoundInterface
	for _, h := range d.Hostdevs {
		name, ours := strings.CutPrefix(h.Alias.Name, userAliasPrefix+sriovAliasPrefix)
		if !ours {
			continue
		}
		iface := model.BoundInterface{Name: name, DeviceType: deviceTypePCI, HostPCIAddress: pciString(&h.Source.Address)}
		if h.Boot != nil {
			iface.BootOrder = &h.Boot.Order
		}
		if h.Address != nil && h.Address.Slot != nil {
			iface.GuestPCIAddress = pciString(h.Address)
		}
		ifaces = append(ifaces, iface)
	}
	return ifaces
}

func pciString(a *libvirtxml.DomainAddressPCI) string {
	v := func(p *uint) uint {
		if p == nil {
			return 0
		}
		return *p
	}
	return netval.PCIAddress{Domain: uint32(v(a.Domain)), Bus: uint8(v(a.Bus)), Slot: uint8(v(a.Slot)), Function: uint8(v(a.Function))}.String()
}

// editLibvirtxml is the alternative edit: the whole domain through libvirtxml.Domain.
func editLibvirtxml(src []byte, ifaces []model.BoundInterface) ([]byte, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(string(src)); err != nil {
		return nil, err
	}
	if d.Devices == nil {
		d.Devices = &libvirtxml.DomainDeviceList{}
	}
	for _, iface := range ifaces {
		if slices.ContainsFunc(d.Devices.Interfaces, func(i libvirtxml.DomainInterface) bool {
			return i.Alias != nil && i.Alias.Name == interfaceAlias(iface.Name)
		}) {
			continue
		}
		hd, err := newHostdev(iface)
		if err != nil {
			return nil, err
		}
		at := slices.IndexFunc(d.Devices.Hostdevs, func(h libvirtxml.DomainHostdev) bool {
			return h.Alias != nil && h.Alias.Name == hd.Alias.Name
		})
		if at < 0 {
			d.Devices.Hostdevs = append(d.Devices.Hostdevs, *hd)
			continue
		}
		if hd.Address == nil {
			hd.Address = d.Devices.Hostdevs[at].Address
		}
		d.Devices.Hostdevs[at] = *hd
	}
	out, err := d.Marshal()
	return []byte(out), err
}

// xmlFacts flattens a document into one line per attribute and per non-blank text: the element path
// (namespace URI and local name, with its index among same-named siblings), then the value. Namespace
// declarations, prefixes, whitespace, quoting and the order of differently named siblings are not facts:
// libvirt reads none of them.
func xmlFacts(doc []byte) ([]string, error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		path  string
		count map[string]int
	}
	stack := []frame{{count: map[string]int{}}}
	var facts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return facts, nil
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			top := &stack[len(stack)-1]
			name := tok.Name.Local
			if tok.Name.Space != "" {
				name = "{" + tok.Name.Space + "}" + name
			}
			top.count[name]++
			path := fmt.Sprintf("%s/%s[%d]", top.path, name, top.count[name])
			stack = append(stack, frame{path: path, count: map[string]int{}})
			for _, a := range tok.Attr {
				if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" && a.Name.Space == "" {
					continue
				}
				facts = append(facts, fmt.Sprintf("%s/@%s=%q", path, a.Name.Local, a.Value))
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				facts = append(facts, fmt.Sprintf("%s/text()=%q", stack[len(stack)-1].path, s))
			}
		}
	}
}

// factDiff returns the facts only in a and only in b.
func factDiff(a, b []string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, f := range a {
		count[f]++
	}
	for _, f := range b {
		count[f]--
	}
	for f, n := range count {
		for ; n > 0; n-- {
			onlyA = append(onlyA, f)
		}
		for ; n < 0; n++ {
			onlyB = append(onlyB, f)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	return onlyA, onlyB
}

// TestEditTwoWays prints, per domain, what the libvirtxml edit loses (-) or adds (+) against the
// splicer's, and fails if the splicer's output differs from the sidecar's recorded one. Run it with -v
// to read the diff:
//
//	SRIOV_UDN_DOMAIN_RECORD_DIR=$PWD/bin/recorded-domains go test -run TestEditTwoWays -v ./pkg/domain
func TestEditTwoWays(t *testing.T) {
	losses := map[string][]string{} // "- fact" (lost) or "+ fact" (added) -> domains
	failed := map[string][]string{} // libvirtxml error -> domains
	corpus := editCorpus(t)
	for _, c := range corpus {
		spliced, err := Apply(c.src, c.ifaces)
		require.NoError(t, err, c.name)
		if c.want != nil {
			require.Equal(t, string(c.want), string(spliced), "%s: the splicer does not reproduce the recorded output", c.name)
		}
		edited, err := editLibvirtxml(c.src, c.ifaces)
		if err != nil {
			failed[err.Error()] = append(failed[err.Error()], c.name)
			// What else it would lose once it reads KubeVirt's hostdevs (libvirt's default mode, made explicit).
			moded := bytes.ReplaceAll(c.src, []byte(`<hostdev type="pci"`), []byte(`<hostdev mode="subsystem" type="pci"`))
			if edited, err = editLibvirtxml(moded, c.ifaces); err != nil {
				continue
			}
			if spliced, err = Apply(moded, c.ifaces); err != nil {
				continue
			}
			c.name += " (mode added)"
		}
		a, err := xmlFacts(spliced)
		require.NoError(t, err, c.name)
		b, err := xmlFacts(edited)
		require.NoError(t, err, c.name)
		lost, added := factDiff(a, b)
		for _, f := range lost {
			losses["- "+f] = append(losses["- "+f], c.name)
		}
		for _, f := range added {
			losses["+ "+f] = append(losses["+ "+f], c.name)
		}
	}
	t.Logf("%d domains; libvirtxml refused %d, changed %d facts", len(corpus), countAll(failed), len(losses))

	// doc.go's verdict rests on this; when libvirtxml reads KubeVirt's PCI hostdevs, weigh the rest of the diff again.
	_, err := editLibvirtxml([]byte(kubevirtDomain), []model.BoundInterface{udnIface()})
	require.ErrorContains(t, err, "'mode'", "libvirtxml now reads a hostdev without mode=: see pkg/domain/doc.go")
	for _, k := range sortedMapKeys(failed) {
		t.Logf("libvirtxml refuses %d: %s (e.g. %s)", len(failed[k]), k, failed[k][0])
	}
	for _, k := range sortedMapKeys(losses) {
		t.Logf("%s   [%d domains, e.g. %s]", k, len(losses[k]), losses[k][0])
	}
}

func countAll(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

func sortedMapKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// BenchmarkEditTwoWays times both edits on each domain of the corpus that libvirtxml can read:
//
//	SRIOV_UDN_DOMAIN_RECORD_DIR=$PWD/bin/recorded-domains go test -run '^$' -bench EditTwoWays -benchmem ./pkg/domain
func BenchmarkEditTwoWays(b *testing.B) {
	var corpus []corpusDomain
	size := 0
	for _, c := range editCorpus(b) {
		if _, err := editLibvirtxml(c.src, c.ifaces); err == nil {
			corpus = append(corpus, c)
			size += len(c.src)
		}
	}
	for _, way := range []struct {
		name string
		edit func([]byte, []model.BoundInterface) ([]byte, error)
	}{{"splicer", Apply}, {"libvirtxml", editLibvirtxml}} {
		b.Run(way.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range corpus {
					if _, err := way.edit(c.src, c.ifaces); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(corpus)), "ns/domain")
			b.ReportMetric(float64(len(corpus)), "domains")
		})
	}
}
