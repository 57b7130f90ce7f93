package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
)

// The largest legal inputs (docs/footprint.md "What a hook call may carry"): 1 MiB of user networkData in every format,
// hostile within the limits (nesting, aliases, merge keys, comments, long scalars), 64 bound NICs,
// 256 KiB of annotations, and the largest domain that fits, with the VMI, in one 4 MiB gRPC message
// (grpc-go's default receive limit, which both virt-launcher and the sidecar keep). Inputs past a
// limit are sent too: their rejection must be cheap.
const (
	LargestNICs        = 64
	LargestAnnotations = 256 << 10
	LargestUserData    = 1 << 20 // cloudinit.MaxNetworkDataBytes
	grpcMessageLimit   = 4 << 20
	// limits of pkg/cloudinit (limits.go), copied so that the fixture does not depend on the code it measures.
	limitDepth   = 64
	limitNodes   = 10000
	limitAliases = 1000
)

// LargestInput is one PreCloudInitIso input.
type LargestInput struct {
	Name        string
	DataSource  cloudinit.DataSourceType
	NetworkData string
	Legal       bool // within every limit: must be merged; else must be rejected
	// UserData is the user data sent with it; "" means a one-line cloud-config. The Secret user data
	// cases (secretuserdata.go) are 1 MiB.
	UserData string
	// RefusedBySize is an input KubeVirt sends that the sidecar refuses before decoding it (pkg/hooks
	// CloudInitDecodeBytes): the answer must name the request's fields, its size and the limit.
	RefusedBySize bool
}

// padYAML appends YAML comment lines and long double-quoted scalars (under key x-notes) until b is
// nearly size bytes: comments and long scalars are what makes a document large without making it
// many nodes (or many tokens: the sidecar's pre-scan counts the words of comments too).
func padYAML(b *strings.Builder, size int) {
	comment := func(limit int) {
		for b.Len() < limit-8 {
			b.WriteString("# " + strings.Repeat("c", min(1000, limit-b.Len()-4)) + "\n")
		}
	}
	b.WriteString("x-notes:\n")
	comment(size / 2)
	for b.Len() < size-16<<10 {
		fmt.Fprintf(b, "  - %q\n", strings.Repeat("n", 8<<10))
	}
	comment(size - 64)
}

func macN(i int) string { return fmt.Sprintf("02:01:00:00:%02x:%02x", i>>8&0xff, i&0xff) }

// NoCloudV1Largest: 250 physical entries with static subnets (about 6,500 nodes), comments and long
// scalars up to 1 MiB.
func NoCloudV1Largest() string {
	var b strings.Builder
	b.WriteString("version: 1\nconfig:\n")
	for i := range 250 {
		fmt.Fprintf(&b, "  - type: physical\n    name: u%d\n    mac_address: %q\n    mtu: 1500\n    subnets:\n"+
			"      - type: static\n        address: 10.%d.%d.5/24\n        gateway: 10.%d.%d.1\n        dns_nameservers: [10.0.0.53, 10.0.1.53]\n",
			i, macN(i), i>>8, i&0xff, i>>8, i&0xff)
	}
	padYAML(&b, LargestUserData)
	return b.String()
}

// NoCloudV2Largest: 250 ethernets that merge a shared anchor and alias another (500 aliases, 250
// merge keys), nested to the depth limit once, comments and long scalars up to 1 MiB.
func NoCloudV2Largest() string {
	var b strings.Builder
	b.WriteString("version: 2\nx-anchors:\n  base: &base {dhcp4: false, mtu: 1500}\n  ns: &ns {addresses: [10.0.0.53], search: [example.com]}\n")
	fmt.Fprintf(&b, "  deep: %s\n", strings.Repeat("[", limitDepth-3)+"1"+strings.Repeat("]", limitDepth-3))
	b.WriteString("ethernets:\n")
	for i := range 250 {
		fmt.Fprintf(&b, "  u%d:\n    <<: *base\n    match: {macaddress: %q}\n    set-name: u%d\n    addresses: [10.%d.%d.5/24]\n"+
			"    routes: [{to: 10.200.0.0/16, via: 10.%d.%d.1}]\n    nameservers: *ns\n", i, macN(i), i, i>>8, i&0xff, i>>8, i&0xff)
	}
	padYAML(&b, LargestUserData)
	return b.String()
}

// ConfigDriveLargest: 200 links and networks, a value nested to the depth limit, long strings up
// to 1 MiB.
func ConfigDriveLargest() string {
	var links, networks []string
	for i := range 200 {
		links = append(links, fmt.Sprintf(`{"id":"u%d","type":"phy","ethernet_mac_address":%q,"mtu":1500}`, i, macN(i)))
		networks = append(networks, fmt.Sprintf(`{"id":"n%d","type":"ipv4","link":"u%d","ip_address":"10.%d.%d.5","netmask":"255.255.255.0","routes":[{"network":"0.0.0.0","netmask":"0.0.0.0","gateway":"10.%d.%d.1"}]}`,
			i, i, i>>8, i&0xff, i>>8, i&0xff))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"links":[%s],"networks":[%s],"services":[],"x-deep":%s,"x-notes":[`, strings.Join(links, ","), strings.Join(networks, ","),
		strings.Repeat("[", limitDepth-2)+"1"+strings.Repeat("]", limitDepth-2))
	for i := 0; b.Len() < LargestUserData-(16<<10); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", strings.Repeat("n", 8<<10))
	}
	b.WriteString("]}")
	return b.String()
}

// LargestInputs are the legal worst cases and, beside them, 1 MiB inputs past each limit.
func LargestInputs() []LargestInput {
	fill := func(prefix, unit, suffix string) string {
		n := (LargestUserData - len(prefix) - len(suffix)) / len(unit)
		return prefix + strings.Repeat(unit, n) + suffix
	}
	var chain strings.Builder
	chain.WriteString("version: 2\nethernets:\n  e0: &a0 {dhcp4: true}\n")
	for i := 1; chain.Len() < LargestUserData-64; i++ {
		fmt.Fprintf(&chain, "  e%d: &a%d {<<: *a%d}\n", i, i, i-1)
	}
	return []LargestInput{
		{"NoCloud v1, 1 MiB", cloudinit.DataSourceNoCloud, NoCloudV1Largest(), true, "", false},
		{"NoCloud v2, 1 MiB, aliases and merge keys", cloudinit.DataSourceNoCloud, NoCloudV2Largest(), true, "", false},
		{"ConfigDrive JSON, 1 MiB, nested to the limit", cloudinit.DataSourceConfigDrive, ConfigDriveLargest(), true, "", false},
		{"NoCloud, 1 MiB flow list of 500k scalars", cloudinit.DataSourceNoCloud, fill("version: 2\nx: [", "a,", "a]\n"), false, "", false},
		{"NoCloud, 1 MiB chain of merge keys", cloudinit.DataSourceNoCloud, chain.String(), false, "", false},
		{"NoCloud, 1 MiB nested flow lists", cloudinit.DataSourceNoCloud, "version: 2\nx: " + strings.Repeat("[", LargestUserData/2-16) + strings.Repeat("]", LargestUserData/2-16) + "\n", false, "", false},
		{"ConfigDrive, 1 MiB nested arrays", cloudinit.DataSourceConfigDrive, `{"x":` + strings.Repeat("[", LargestUserData/2-8) + strings.Repeat("]", LargestUserData/2-8) + "}", false, "", false},
		{"ConfigDrive, 1 MiB list of 500k numbers", cloudinit.DataSourceConfigDrive, fill(`{"links":[`, "0,", "0]}"), false, "", false},
	}
}

// LargestSecretInputs are the Secret user data worst cases, 1 MiB each.
func LargestSecretInputs() []LargestInput {
	var out []LargestInput
	for _, c := range SecretUserDataCases() {
		out = append(out, LargestInput{Name: "Secret user data: " + c.Name, DataSource: cloudinit.DataSourceNoCloud, Legal: true, UserData: c.UserData})
	}
	return out
}

// LargestRequest is the largest request of all: 1 MiB of user data and 1 MiB of networkData, each from
// its own Secret and each byte escaped to 6, about 24 MiB on the wire with virt-launcher's two copies.
// The sidecar receives it whole and refuses it before decoding it (decoding would cost two and a half times
// its size, past KubeVirt's 64M sidecar limit), naming the request's fields, its size and the limit.
func LargestRequest() LargestInput {
	var nd strings.Builder
	nd.WriteString("version: 1\nconfig: []\n")
	for nd.Len() < LargestUserData-1024 {
		nd.WriteString("# " + strings.Repeat("<", 1000) + "\n")
	}
	return LargestInput{Name: "Secret user data (HTML) and networkData of '<', 1 MiB each", DataSource: cloudinit.DataSourceNoCloud,
		NetworkData: nd.String(), Legal: true, UserData: SecretUserDataCases()[0].UserData, RefusedBySize: true}
}

// LargestDomain is a KubeVirt-shaped domain that, sent with vmiJSON, fills a 4 MiB gRPC message:
// small elements, the shape that costs an XML tokenizer the most per byte.
func LargestDomain(vmiJSON []byte) ([]byte, error) {
	base, err := DomainXML()
	if err != nil {
		return nil, err
	}
	i := bytes.Index(base, []byte("<devices>"))
	if i < 0 {
		return nil, fmt.Errorf("domain fixture has no <devices>")
	}
	size := grpcMessageLimit - len(vmiJSON) - 4<<10
	var b bytes.Buffer
	b.Grow(size)
	b.Write(base[:i])
	b.WriteString("<metadata>\n")
	for n := 0; b.Len() < size-len(base)-64; n++ {
		fmt.Fprintf(&b, "\t\t<pad n=\"%d\"><v>x</v></pad>\n", n)
	}
	b.WriteString("\t</metadata>\n\t")
	b.Write(base[i:])
	return b.Bytes(), nil
}

// LargestResult is the peak RSS after the largest legal inputs.
type LargestResult struct {
	NICs            int              `json:"nics"`
	AnnotationBytes int              `json:"annotation_bytes"`
	DomainBytes     int              `json:"domain_bytes"`
	Inputs          []LargestOutcome `json:"inputs"`
	PeakRSSKiB      int64            `json:"peak_rss_kib"`
	ReadyPeakKiB    int64            `json:"ready_peak_rss_kib"`
	BeforeDomainKiB int64            `json:"before_domain_peak_rss_kib"`
	// LargestRequest is the largest request (LargestRequest), sent last: its peak is above the others'.
	LargestRequest LargestOutcome `json:"largest_request"`
}

// LargestOutcome is what one input did.
type LargestOutcome struct {
	Name     string        `json:"name"`
	Bytes    int           `json:"bytes"`
	Legal    bool          `json:"legal"`
	Accepted bool          `json:"accepted"`
	Duration time.Duration `json:"duration_ns"`
	Error    string        `json:"error,omitempty"`
	// PeakAfterKiB is VmHWM after this input (monotonic: the first input that raises it is the cost).
	PeakAfterKiB int64 `json:"peak_after_kib"`
}

// MeasureLargest sends every largest input to the sidecar at socket (pid), whose pod-info must
// already hold Annotations(Ifaces(LargestNICs, ...), LargestAnnotations), and returns VmHWM before
// and after. A legal input that is rejected, or an illegal one that is accepted, is an error.
func MeasureLargest(socket string, pid int) (LargestResult, error) {
	res := LargestResult{NICs: LargestNICs, AnnotationBytes: LargestAnnotations}
	before, err := ReadProcStats(pid)
	if err != nil {
		return res, err
	}
	res.ReadyPeakKiB = before.HWMKiB
	vmi := VMI(Ifaces(LargestNICs, BaseNAD))
	vmiJSON, err := json.Marshal(vmi)
	if err != nil {
		return res, fmt.Errorf("marshal VMI: %w", err)
	}
	send := func(in LargestInput) (LargestOutcome, error) {
		userData := in.UserData
		if userData == "" {
			userData = "#cloud-config\n"
		}
		data := &cloudinit.CloudInitData{
			DataSource: in.DataSource, UserData: userData, NetworkData: in.NetworkData, VolumeName: "cloudinitdisk",
			NoCloudMetaData: &cloudinit.NoCloudMetadata{InstanceID: "bench"},
		}
		if in.DataSource == cloudinit.DataSourceConfigDrive {
			data.NoCloudMetaData = nil
			data.ConfigDriveMetaData = &cloudinit.ConfigDriveMetadata{InstanceID: "bench", UUID: VMIUID}
		}
		t0 := time.Now()
		_, err := CallPreCloudInitIso(socket, vmi, data)
		o := LargestOutcome{Name: in.Name, Bytes: len(in.NetworkData) + len(in.UserData), Legal: in.Legal, Accepted: err == nil, Duration: time.Since(t0)}
		if err != nil {
			o.Error = err.Error()
		}
		st, serr := ReadProcStats(pid)
		if serr != nil {
			return o, serr
		}
		o.PeakAfterKiB = st.HWMKiB
		if want := in.Legal && !in.RefusedBySize; o.Accepted != want {
			return o, fmt.Errorf("%s (%d bytes): legal %v, refused by size %v, but accepted %v: %v", in.Name, o.Bytes, in.Legal, in.RefusedBySize, o.Accepted, err)
		}
		if in.RefusedBySize {
			for _, want := range []string{"PreCloudInitIsoParams", "cloudInitData", "bytes the sidecar decodes", "user data and networkData"} {
				if !strings.Contains(o.Error, want) {
					return o, fmt.Errorf("%s: refused, but the error does not say %q: %s", in.Name, want, o.Error)
				}
			}
		}
		return o, nil
	}
	for _, in := range append(LargestInputs(), LargestSecretInputs()...) {
		o, err := send(in)
		res.Inputs = append(res.Inputs, o)
		if err != nil {
			return res, err
		}
	}
	dom, err := LargestDomain(vmiJSON)
	if err != nil {
		return res, err
	}
	res.DomainBytes = len(dom)
	res.BeforeDomainKiB = res.Inputs[len(res.Inputs)-1].PeakAfterKiB
	for range 3 { // virt-launcher calls it several times per start, each with the previous result
		if err := CallOnDefineDomain(socket, dom, vmiJSON); err != nil {
			return res, fmt.Errorf("OnDefineDomain with a %d-byte domain: %w", len(dom), err)
		}
	}
	after, err := ReadProcStats(pid)
	if err != nil {
		return res, err
	}
	res.PeakRSSKiB = after.HWMKiB
	res.LargestRequest, err = send(LargestRequest())
	return res, err
}
