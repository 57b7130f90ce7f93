//go:build sriovudn_stock || sriovudn_patched

// Differential test of virt-handler's NetStat, stock and patched, against entries written by the built
// sriov-udn-binding sidecar. patches/kubevirt/test.sh copies this directory into pkg/network/setup of a
// stock tree (-tags sriovudn_stock) and of the patched tree (-tags sriovudn_patched) and runs
// TestSidecarDiff in both: each scenario states what stock does and what the patched NetStat does.
package network_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	k8stypes "k8s.io/apimachinery/pkg/types"

	v1 "kubevirt.io/api/core/v1"

	"kubevirt.io/kubevirt/pkg/network/deviceinfo"
	"kubevirt.io/kubevirt/pkg/network/namescheme"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
)

const (
	diffVMIUID    = "5d0c6a1e-2b9f-4c61-9d0e-7f3b8c1a2e44"
	diffPodUID    = "7a1f0c2e-0b1d-4d5e-8f00-1b2c3d4e5f60"
	diffNode      = "node01"
	diffIface     = "sriov-net"
	diffNAD       = "tenant-a/sriov-nad"
	diffMAC       = "02:00:00:aa:01:01"
	diffIPv4      = "10.66.10.77"
	diffLinkLocal = "fe80::ff:fe00:aa01"
	diffForged    = "169.254.169.254"
	diffNewLease  = "10.66.10.88"
)

// podLayout is the launcher pod's volumes as the kubelet keeps them on the node.
type podLayout struct {
	kubeletPodsDir string
	podInfoDir     string // the pod-info volume our MutatingAdmissionPolicy adds (sriov-udn-podinfo)
	sidecarDir     string // the sidecar's --iface-cache-dir: hook-sidecar-0/ifacecache in the shared emptyDir
}

func newPodLayout(t *testing.T) podLayout {
	t.Helper()
	kubeletPodsDir := t.TempDir()
	volumes := filepath.Join(kubeletPodsDir, diffPodUID, "volumes")
	l := podLayout{
		kubeletPodsDir: kubeletPodsDir,
		podInfoDir:     filepath.Join(volumes, "kubernetes.io~downward-api", "sriov-udn-podinfo"),
		sidecarDir:     filepath.Join(volumes, "kubernetes.io~empty-dir", "hook-sidecar-sockets", "hook-sidecar-0", "ifacecache"),
	}
	l.writePodInfo(t, podAnnotations(t, diffIPv4, ""))
	return l
}

// writePodInfo (re)writes the pod-info volume with annotations as the kubelet updates a downward API
// volume: a new timestamped directory, then ..data swapped to it.
func (l podLayout) writePodInfo(t *testing.T, annotations map[string]string) {
	t.Helper()
	labels := map[string]string{"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": diffVMIUID}
	writeKubeletDownwardAPI(t, l.podInfoDir, map[string]string{"annotations": formatMap(annotations), "labels": formatMap(labels)})
}

// podAnnotations are the launcher pod's network annotations with ip on the VF's network; ipamMode is
// pod-networks' ipam_mode for it ("" or "dhcp": OKEP-6224, where ovnkube-node reports the lease it
// discovered at CNI ADD in both pod-networks and the CNI result, hence network-status).
func podAnnotations(t *testing.T, ip, ipamMode string) map[string]string {
	t.Helper()
	podIface := namescheme.GenerateHashedInterfaceName(diffIface)
	networkStatus, err := json.Marshal([]map[string]any{
		{"name": "ovn-kubernetes", "interface": "eth0", "ips": []string{"10.244.1.12"}, "default": true},
		{"name": diffNAD, "interface": podIface, "ips": []string{ip}, "mac": diffMAC, "mtu": 1500,
			"device-info": map[string]any{"type": "pci", "version": "1.1.0", "pci": map[string]string{"pci-address": "0000:65:00.2"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	vf := map[string]any{"ip_addresses": []string{ip + "/24"}, "mac_address": diffMAC, "role": "secondary"}
	if ipamMode != "" {
		vf["ipam_mode"] = ipamMode
	}
	podNetworks, err := json.Marshal(map[string]any{
		"default": map[string]any{"ip_addresses": []string{"10.244.1.12/24"}, "mac_address": "0a:58:0a:f4:01:0c", "role": "primary"},
		diffNAD:   vf,
	})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"k8s.v1.cni.cncf.io/network-status": string(networkStatus),
		"k8s.ovn.org/pod-networks":          string(podNetworks),
	}
}

// formatMap renders a map as the kubelet does for a downward API file (pkg/fieldpath FormatMap).
func formatMap(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, k+"="+strconv.Quote(v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// writeKubeletDownwardAPI lays the files out as kubelet's AtomicWriter does (pkg/volume/util/atomic_writer.go):
// a new timestamped directory, ..data_tmp linking to it renamed over ..data, each file a link through ..data
// (made once), and the previous directory removed.
func writeKubeletDownwardAPI(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts, err := os.MkdirTemp(dir, "..2026_11_30_10_00_00.")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ts, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

func diffVMI() *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm-sriov", "tenant-a", diffVMIUID
	vmi.Status.NodeName = diffNode
	vmi.Status.ActivePods = map[k8stypes.UID]string{diffPodUID: diffNode}
	vmi.Spec.Networks = []v1.Network{{Name: diffIface, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: diffNAD}}}}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: diffIface, MacAddress: diffMAC, Binding: &v1.PluginBinding{Name: "sriov-udn"}}}
	vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}}}
	return vmi
}

// sidecarWritesEntries runs the built sidecar's render on the pod's own downward API files and writes
// the cache entries it reports where the sidecar writes them (--iface-cache-dir/<vmi-uid>/<iface>).
func sidecarWritesEntries(t *testing.T, l podLayout) {
	t.Helper()
	bin := os.Getenv("SRIOV_UDN_SIDECAR")
	if bin == "" {
		t.Fatal("SRIOV_UDN_SIDECAR must name the built sidecar binary (patches/kubevirt/test.sh sets it)")
	}
	vmiJSON, err := json.Marshal(diffVMI())
	if err != nil {
		t.Fatal(err)
	}
	vmiFile := filepath.Join(t.TempDir(), "vmi.json")
	if err := os.WriteFile(vmiFile, vmiJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "render", "--pod-info-dir", l.podInfoDir, "--vmi", vmiFile, "--format", "json").Output()
	if err != nil {
		t.Fatalf("sidecar render: %v\n%s", err, out)
	}
	var report struct {
		InterfaceCache []struct {
			Path string          `json:"path"`
			Data json.RawMessage `json:"data"`
		} `json:"interfaceCache"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("sidecar render output: %v", err)
	}
	if len(report.InterfaceCache) != 1 || report.InterfaceCache[0].Path != diffVMIUID+"/"+diffIface {
		t.Fatalf("sidecar render reported cache entries %+v, want one at %s/%s", report.InterfaceCache, diffVMIUID, diffIface)
	}
	writeEntry(t, filepath.Join(l.sidecarDir, report.InterfaceCache[0].Path), report.InterfaceCache[0].Data)
}

// writeEntry writes an entry as the sidecar does (pkg/ifacecache writeAtomic): a temporary file renamed over it.
func writeEntry(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func vfDomain(guestAgentIPs ...[]string) *api.Domain {
	domain := &api.Domain{}
	domain.Spec.Devices.HostDevices = []api.HostDevice{{Alias: api.NewUserDefinedAlias(deviceinfo.SRIOVAliasPrefix + diffIface)}}
	for _, ips := range guestAgentIPs {
		domain.Status.Interfaces = append(domain.Status.Interfaces, api.InterfaceStatus{Mac: diffMAC, IPs: ips, InterfaceName: "eth1"})
	}
	return domain
}

// reportedIPs runs one status update and returns the VF's IPs as vmi.status would show them.
func reportedIPs(t *testing.T, netStat *netsetup.NetStat, vmi *v1.VirtualMachineInstance, domain *api.Domain) string {
	t.Helper()
	if err := netStat.UpdateStatus(vmi, domain); err != nil {
		t.Fatal(err)
	}
	for _, s := range vmi.Status.Interfaces {
		if s.Name == diffIface {
			return fmt.Sprintf("%s %v", s.IP, s.IPs)
		}
	}
	t.Fatalf("no status for interface %s in %+v", diffIface, vmi.Status.Interfaces)
	return ""
}

func TestSidecarDiff(t *testing.T) {
	v4 := diffIPv4 + " [" + diffIPv4 + "]"
	none := " []"
	tests := []struct {
		name string
		// run returns the IPs reported on each status update.
		run         func(t *testing.T, l podLayout, netStat *netsetup.NetStat) []string
		wantStock   []string
		wantPatched []string
	}{{
		name: "a VF with the sidecar's entry shows its IPs before any guest agent runs",
		run: func(t *testing.T, l podLayout, netStat *netsetup.NetStat) []string {
			sidecarWritesEntries(t, l)
			return []string{reportedIPs(t, netStat, diffVMI(), vfDomain())}
		},
		wantStock:   []string{none}, // stock reads only its own cache, which holds nothing for a VF
		wantPatched: []string{v4},
	}, {
		name: "an entry the sidecar writes after the first status update is picked up",
		run: func(t *testing.T, l podLayout, netStat *netsetup.NetStat) []string {
			vmi := diffVMI()
			first := reportedIPs(t, netStat, vmi, vfDomain())
			sidecarWritesEntries(t, l)
			return []string{first, reportedIPs(t, netStat, vmi, vfDomain())}
		},
		wantStock:   []string{none, none},
		wantPatched: []string{none, v4},
	}, {
		name: "the seed's sequence: guest agent reports only link-local, then nothing, then both",
		run: func(t *testing.T, l podLayout, netStat *netsetup.NetStat) []string {
			sidecarWritesEntries(t, l)
			vmi := diffVMI()
			return []string{
				reportedIPs(t, netStat, vmi, vfDomain([]string{diffLinkLocal})),
				reportedIPs(t, netStat, vmi, vfDomain([]string{})),
				reportedIPs(t, netStat, vmi, vfDomain([]string{diffIPv4, diffLinkLocal})),
			}
		},
		wantStock: []string{ // the guest agent's report only: flaps
			diffLinkLocal + " [" + diffLinkLocal + "]",
			none,
			diffIPv4 + " [" + diffIPv4 + " " + diffLinkLocal + "]",
		},
		wantPatched: []string{
			diffIPv4 + " [" + diffIPv4 + " " + diffLinkLocal + "]",
			v4,
			diffIPv4 + " [" + diffIPv4 + " " + diffLinkLocal + "]",
		},
	}, {
		// OKEP-6224 DHCP mode: the pod-networks entry is MAC-only until CNI ADD reports the lease (the sidecar
		// waits and writes nothing), and a sandbox recreated before the pod runs takes a new lease, which
		// rewrites both annotations and so the sidecar's entry. Stock NetStat would keep its first read of
		// an entry (netstat.go getPodInterfacefromFileCache); the patched one reads it on every update.
		name: "DHCP mode: an entry written when the lease arrives and rewritten with a new lease is re-read",
		run: func(t *testing.T, l podLayout, netStat *netsetup.NetStat) []string {
			vmi := diffVMI()
			reports := []string{reportedIPs(t, netStat, vmi, vfDomain())}
			l.writePodInfo(t, podAnnotations(t, diffIPv4, "dhcp"))
			sidecarWritesEntries(t, l)
			reports = append(reports, reportedIPs(t, netStat, vmi, vfDomain()))
			l.writePodInfo(t, podAnnotations(t, diffNewLease, "dhcp"))
			sidecarWritesEntries(t, l)
			return append(reports, reportedIPs(t, netStat, vmi, vfDomain()))
		},
		wantStock:   []string{none, none, none},
		wantPatched: []string{none, v4, diffNewLease + " [" + diffNewLease + "]"},
	}, {
		name: "an entry forged by the compute container (same uid, shared emptyDir) is refused",
		run: func(t *testing.T, l podLayout, netStat *netsetup.NetStat) []string {
			forged := fmt.Sprintf(`{"iface":{"name":%q},"podIP":%q,"podIPs":[%q]}`, diffIface, diffForged, diffForged)
			writeEntry(t, filepath.Join(l.sidecarDir, diffVMIUID, diffIface), []byte(forged))
			return []string{reportedIPs(t, netStat, diffVMI(), vfDomain())}
		},
		wantStock:   []string{none}, // stock reads no entry at all
		wantPatched: []string{none},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newPodLayout(t)
			got := tt.run(t, l, newNetStatUnderTest(t, l))
			want := tt.wantPatched
			if netStatFlavor == "stock" {
				want = tt.wantStock
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s NetStat reported %q on successive updates, want %q", netStatFlavor, got, want)
			}
			t.Logf("%s NetStat reported %q", netStatFlavor, got)
		})
	}
}
