package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/guest"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// The VM with a guest: a pod NIC (masquerade) and one VF network bound to sriov-udn, dual-stack, booted from
// test/guest's ClusterImageSpec (containerDisk and kernel boot). Its NAD's IPAM gives DNS (host-local reads it
// from resolvConf), so network-status carries nameservers as Multus writes them from the delegate's result.
const (
	guestVM     = "vm-guest"
	guestVFMAC  = "02:00:00:aa:02:01"
	guestPodMAC = "02:00:00:00:00:0b"
	guestNAD    = "udn-guest"
)

// standinAliasLabel is the VF stand-in's label (test/cmd/cluster-vfstandin AliasLabel): set to "kubevirt" on a
// VMI, it gives the stand-in's emulated NIC KubeVirt's own alias, so that virt-handler reports it under the
// interface's name as it reports a real VF's hostdev. It also hides stock virt-launcher's NIC hot-plug defect
// (defect_test.go), so only the VM whose tests read vmi.status.interfaces carries it.
const standinAliasLabel = "cluster.sriov-udn.test/vf-standin-alias"

// guestVMYAML is the VM named name; resolvConf is the host-local resolvConf path (a file the test writes).
// statusAlias labels its VMI with standinAliasLabel=kubevirt. Its root is the containerDisk (every start a first
// boot), or, with rootDisk set, that raw image on the node as a hostDisk (KubeVirt's HostDisk gate): a restart
// boots the same root again. The hostDisk says it is shared, as a path on shared storage would be: otherwise
// KubeVirt refuses to migrate the VM for its disk (pkg/virt-handler/vm.go), before our binding is considered.
func guestVMYAML(resolvConf, name string, statusAlias bool, rootDisk string) string {
	root := fmt.Sprintf(`{name: root, containerDisk: {image: "%s", imagePullPolicy: IfNotPresent}}`, GuestDiskImage)
	if rootDisk != "" {
		root = fmt.Sprintf(`{name: root, hostDisk: {path: "%s", type: Disk, shared: true}}`, rootDisk)
	}
	labels := "{}"
	if statusAlias {
		labels = "{" + standinAliasLabel + ": kubevirt}"
	}
	return fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: %[1]s, namespace: default}
spec:
  config: '{"cniVersion": "1.0.0", "name": "%[1]s", "type": "sriov", "deviceID": "0000:65:00.4", "mtu": 1400, "ipam": {"type": "host-local",
    "resolvConf": "%[2]s", "ranges": [[{"subnet": "192.168.60.0/24"}], [{"subnet": "fd60::/64"}]],
    "routes": [{"dst": "192.168.61.0/24", "gw": "192.168.60.1"}, {"dst": "fd61::/64", "gw": "fd60::1"}]}}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: standin-none, namespace: default}
spec:
  config: '{"cniVersion": "1.0.0", "name": "standin-none", "type": "none"}'
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: %[3]s, namespace: default}
spec:
  runStrategy: Always
  template:
    metadata: {labels: %[11]s}
    spec:
      # As docs/install.md's example VM (manifests/examples/vm.yaml): our ValidatingAdmissionPolicy refuses a VM
      # using the binding without an explicit evictionStrategy, and warns without the memlock reservation.
      evictionStrategy: None
      domain:
        resources: {requests: {memory: 512Mi}}
        memory: {reservedOverhead: {memLock: Required}}
        firmware:
          kernelBoot:
            kernelArgs: "%[4]s"
            container: {image: "%[5]s", kernelPath: "%[6]s", initrdPath: "%[7]s", imagePullPolicy: IfNotPresent}
        devices:
          interfaces:
          - {name: default, masquerade: {}, macAddress: "%[8]s"}
          - {name: udn-vf, binding: {name: sriov-udn}, macAddress: "%[9]s"}
          - {name: standin, binding: {name: vf-standin}}
          disks:
          - {name: root, disk: {bus: virtio}}
          - {name: cloudinit, disk: {bus: virtio}}
      networks:
      - {name: default, pod: {}}
      - {name: udn-vf, multus: {networkName: %[1]s}}
      - {name: standin, multus: {networkName: standin-none}}
      volumes:
      - %[10]s
      - {name: cloudinit, cloudInitNoCloud: {userData: "#cloud-config\n"}}
`, guestNAD, resolvConf, name, guest.ClusterKernelArgs, GuestKernelImage, GuestKernelPath, GuestInitrdPath,
		guestPodMAC, guestVFMAC, root, labels)
}

// plainGuestVMI is the same guest with the pod NIC only.
func plainGuestVMI() string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-guest-plain, namespace: default}
spec:
  domain:
    resources: {requests: {memory: 512Mi}}
    firmware:
      kernelBoot:
        kernelArgs: "%s"
        container: {image: "%s", kernelPath: "%s", initrdPath: "%s", imagePullPolicy: IfNotPresent}
    devices:
      interfaces:
      - {name: default, masquerade: {}, macAddress: "%s"}
      disks:
      - {name: root, disk: {bus: virtio}}
      - {name: cloudinit, disk: {bus: virtio}}
  networks:
  - {name: default, pod: {}}
  volumes:
  - {name: root, containerDisk: {image: "%s", imagePullPolicy: IfNotPresent}}
  - {name: cloudinit, cloudInitNoCloud: {userData: "#cloud-config\n"}}
`, guest.ClusterKernelArgs, GuestKernelImage, GuestKernelPath, GuestInitrdPath, guestPodMAC, GuestDiskImage)
}

// vfNetwork is what the launcher pod's annotations say of the VF network: the addresses (with the prefix
// OVN-K's pod-networks gives), the routes and the nameservers (Multus' network-status).
type vfNetwork struct {
	Prefixes    []netip.Prefix
	Routes      map[string]string // destination -> next hop
	Nameservers []string
	Search      []string
	MTU         int
}

// addrs are the network's IPv4 and IPv6 addresses, without their prefix lengths.
func (n vfNetwork) addrs() (v4, v6 []string) {
	for _, p := range n.Prefixes {
		if p.Addr().Is4() {
			v4 = append(v4, p.Addr().String())
		} else {
			v6 = append(v6, p.Addr().String())
		}
	}
	return v4, v6
}

// readVFNetwork reads the VF network's entry of both annotations of pod, with plain JSON (not the sidecar's
// parsers): the test's expectation must not come from the code under test.
func readVFNetwork(pod *corev1.Pod) (vfNetwork, error) {
	var out vfNetwork
	var statuses []struct {
		Name string   `json:"name"`
		IPs  []string `json:"ips"`
		MTU  int      `json:"mtu"`
		DNS  struct {
			Nameservers []string `json:"nameservers"`
			Search      []string `json:"search"`
		} `json:"dns"`
	}
	if err := json.Unmarshal([]byte(pod.Annotations["k8s.v1.cni.cncf.io/network-status"]), &statuses); err != nil {
		return out, fmt.Errorf("network-status of pod %s: %w", pod.Name, err)
	}
	podNetworks, err := ovn.Decode(pod.Annotations[ovn.PodNetworksAnnotation])
	if err != nil {
		return out, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	name := "default/" + guestNAD
	pn, ok := podNetworks[name]
	if !ok {
		return out, fmt.Errorf("pod-networks of pod %s has no %s", pod.Name, name)
	}
	if out.Prefixes, err = pn.Prefixes(); err != nil {
		return out, fmt.Errorf("pod-networks of pod %s: %s: %w", pod.Name, name, err)
	}
	out.Routes = map[string]string{}
	for _, r := range pn.Routes {
		out.Routes[r.Dest] = r.NextHop
	}
	for _, st := range statuses {
		if st.Name != name {
			continue
		}
		out.Nameservers, out.Search, out.MTU = st.DNS.Nameservers, st.DNS.Search, st.MTU
		var want []string
		for _, p := range out.Prefixes {
			want = append(want, p.Addr().String())
		}
		if !sameSet(st.IPs, want) {
			return out, fmt.Errorf("pod %s: network-status gives %s the IPs %v, pod-networks %v", pod.Name, name, st.IPs, want)
		}
		return out, nil
	}
	return out, fmt.Errorf("network-status of pod %s has no %s", pod.Name, name)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// vmiNow reads the VMI.
func vmiNow(ctx context.Context, e *env, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	out, err := e.node.Kube().Run(ctx, nil, "get", "vmi", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal(out, &vmi); err != nil {
		return nil, fmt.Errorf("VMI %s: %w", name, err)
	}
	return &vmi, nil
}

// eventNaming returns the message of the first event of the default namespace's object name whose message
// contains text.
func eventNaming(ctx context.Context, e *env, name, text string) (string, error) {
	events, err := e.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return "", err
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Message, text) {
			return ev.Message, nil
		}
	}
	return "", fmt.Errorf("no event of %s names %q yet (%d events)", name, text, len(events.Items))
}

// statusOf returns the VMI status entry of the interface name, or nil.
func statusOf(vmi *kubevirtv1.VirtualMachineInstance, name string) *kubevirtv1.VirtualMachineInstanceNetworkInterface {
	for i := range vmi.Status.Interfaces {
		if vmi.Status.Interfaces[i].Name == name {
			return &vmi.Status.Interfaces[i]
		}
	}
	return nil
}

// ipsOf returns the status entry's IPs of one family.
func ipsOf(st *kubevirtv1.VirtualMachineInstanceNetworkInterface, v4 bool) []string {
	if st == nil {
		return nil
	}
	var out []string
	for _, s := range st.IPs {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() == v4 {
			out = append(out, s)
		}
	}
	return out
}

// guestRun is one VMI of the VM: its launcher pod and what its guest reported on the serial console.
type guestRun struct {
	// toRunning and toReport are the times from the VMI's creation (the caller's start) to Running and to the
	// guest's report (the guest configured).
	toRunning, toReport time.Duration
	vmi                 *kubevirtv1.VirtualMachineInstance
	sidecar             string // the launcher pod's container that runs our image
	pod                 *corev1.Pod
	net                 vfNetwork
	report              *guest.Report
	vfDev               string
}

// awaitGuest waits for the VM's VMI (not the one of UID notUID) to be Running and its guest to report, and
// checks that KubeVirt rendered our sidecar into its pod. Failures name the layer: KubeVirt (VMI, pod), guest.
func awaitGuest(ctx context.Context, t *testing.T, e *env, name, notUID string, start time.Time, vf bool) *guestRun {
	t.Helper()
	run := &guestRun{}
	if err := e.node.pollFor(ctx, "KubeVirt: VMI "+name+" Running", 8*time.Minute, time.Second, nil, func() error {
		vmi, err := vmiNow(ctx, e, name)
		if err != nil {
			return err
		}
		if string(vmi.UID) == notUID {
			return fmt.Errorf("still the VMI of the previous run")
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		run.vmi = vmi
		run.toRunning = time.Since(start)
		return nil
	}); err != nil {
		events, _ := e.node.Kube().Run(ctx, nil, "get", "events", "-n", "default", "--sort-by=.lastTimestamp")
		t.Fatalf("%v\nevents:\n%s", err, events)
	}
	pods, err := e.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(run.vmi.UID)})
	require.NoError(t, err, "KubeVirt: the launcher pod")
	require.Len(t, pods.Items, 1, "KubeVirt: one launcher pod for VMI %s", run.vmi.UID)
	run.pod = &pods.Items[0]
	if vf {
		for _, c := range run.pod.Spec.Containers {
			if c.Image == SidecarImage {
				run.sidecar = c.Name
			}
		}
		require.NotEmpty(t, run.sidecar, "KubeVirt: the launcher pod runs our sidecar")
		run.net, err = readVFNetwork(run.pod)
		require.NoError(t, err, "cluster (CNI stand-in): the pod's annotations")
	}

	var console string
	if err := e.node.pollFor(ctx, "guest: the report on the serial console", 15*time.Minute, 2*time.Second, nil, func() error {
		b, err := e.client.CoreV1().Pods("default").GetLogs(run.pod.Name, &corev1.PodLogOptions{Container: "guest-console-log"}).DoRaw(ctx)
		if err != nil {
			return err
		}
		console = string(b)
		run.report, err = guest.ParseReport(console)
		return err
	}); err != nil {
		t.Fatalf("%v\nconsole (last 3000 bytes):\n%s", err, console[max(0, len(console)-3000):])
	}
	run.toReport = time.Since(start)
	if !vf {
		return run
	}
	link, ok := run.report.LinkByMAC(guestVFMAC)
	require.True(t, ok, "guest: a link with the VF's MAC %s\n%s", guestVFMAC, run.report)
	run.vfDev = link.Name
	return run
}

// checkGuestNetwork asserts the guest's own view of the VF network against the pod's annotations.
func checkGuestNetwork(t *testing.T, run *guestRun) {
	t.Helper()
	r := run.report
	assert.Empty(t, r.StageErrors, "guest: cloud-init's stages ran without errors\n%s", r)
	assert.True(t, strings.HasPrefix(r.Datasource, "DataSourceNoCloud"), "guest: cloud-init's datasource %q, want NoCloud", r.Datasource)
	// The pod NIC (masquerade) keeps the DHCP that our config puts in the place of cloud-init's fallback.
	pod, ok := r.LinkByMAC(guestPodMAC)
	require.True(t, ok, "guest: a link with the pod NIC's MAC %s\n%s", guestPodMAC, r)
	assert.NotEmpty(t, pod.DynamicPrefixes(), "guest: the pod NIC %s holds a DHCP lease\n%s", pod.Name, r)
	link, _ := r.LinkByMAC(guestVFMAC)
	var got, want []string
	for _, p := range link.GlobalPrefixes() {
		got = append(got, p.String())
	}
	for _, p := range run.net.Prefixes {
		want = append(want, p.String())
	}
	require.Len(t, want, 2, "cluster: the VF network is dual-stack")
	assert.ElementsMatch(t, want, got, "guest: %s's addresses against the annotations'\n%s", link.Name, r)
	routes := map[string]string{}
	for _, rt := range r.RoutesVia(link.Name) {
		if rt.Gateway.IsValid() {
			routes[rt.Dst] = rt.Gateway.String()
		}
	}
	require.NotEmpty(t, run.net.Routes, "cluster: pod-networks gives the VF network routes")
	for dst, via := range run.net.Routes {
		assert.Equal(t, via, routes[dst], "guest: route %s via %s on %s\n%s", dst, via, link.Name, r)
	}
	assert.Empty(t, r.DefaultRoutes(link.Name), "guest: no default route through a secondary network's VF")
	_, unit, ok := r.NetworkdUnitFor(guestVFMAC)
	require.True(t, ok, "guest: a networkd unit for the VF\n%s", r)
	require.NotEmpty(t, run.net.Nameservers, "cluster: network-status gives the VF network nameservers")
	assert.ElementsMatch(t, run.net.Nameservers, guest.UnitValues(unit, "DNS"), "guest: networkd's DNS= against network-status's nameservers\n%s", unit)
}

// checkGuestMTUAndResolver asserts the VF's MTU (the report's `ip -j addr`) against network-status, and its
// nameservers and search domains as the guest's resolver holds them: systemd-resolved's per-link servers and
// domains (resolvectl, which networkd hands them to), and the search line of /etc/resolv.conf, which the C
// library reads.
func checkGuestMTUAndResolver(ctx context.Context, t *testing.T, e *env, run *guestRun) {
	t.Helper()
	require.NotZero(t, run.net.MTU, "cluster (CNI stand-in): network-status gives the VF network an mtu")
	link, _ := run.report.LinkByMAC(guestVFMAC)
	assert.Equal(t, run.net.MTU, link.MTU, "guest: %s's MTU against network-status's\n%s", link.Name, run.report)
	require.NotEmpty(t, run.net.Search, "cluster: network-status gives the VF network search domains")
	require.NotEmpty(t, run.net.Nameservers, "cluster: network-status gives the VF network nameservers")
	perLink := func(what string) []string {
		out, err := guestOutput(ctx, e, run, "resolvectl "+what+" "+run.vfDev)
		require.NoError(t, err)
		// "Link 3 (enp2s0): 192.168.60.53 fd60::53"
		_, values, ok := strings.Cut(out, "):")
		require.True(t, ok, "guest: resolvectl %s %s: %q", what, run.vfDev, out)
		return strings.Fields(values)
	}
	assert.ElementsMatch(t, run.net.Nameservers, perLink("dns"), "guest: the resolver's nameservers of %s against network-status's", run.vfDev)
	assert.ElementsMatch(t, run.net.Search, perLink("domain"), "guest: the resolver's search domains of %s against network-status's", run.vfDev)
	conf, err := guestOutput(ctx, e, run, "cat /etc/resolv.conf")
	require.NoError(t, err)
	var search []string
	for _, line := range strings.Split(conf, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "search" {
			search = append(search, f[1:]...)
		}
	}
	assert.Subset(t, search, run.net.Search, "guest: /etc/resolv.conf's search line holds network-status's search domains\n%s", conf)
}

// guestExec runs a shell command in the guest through QEMU's guest agent (guest-exec, from the compute
// container's virsh), without waiting for it to finish: the command may restart the agent itself.
func guestExec(ctx context.Context, e *env, run *guestRun, script string) error {
	_, err := agentCommand(ctx, e, run, map[string]any{"execute": "guest-exec", "arguments": map[string]any{
		"path": "/bin/sh", "arg": []string{"-c", script}}})
	if err != nil {
		return fmt.Errorf("guest: guest-exec %q: %w", script, err)
	}
	return nil
}

// guestOutput runs a shell command in the guest through QEMU's guest agent and returns what it wrote to
// standard output, once it exited 0.
func guestOutput(ctx context.Context, e *env, run *guestRun, script string) (string, error) {
	out, err := agentCommand(ctx, e, run, map[string]any{"execute": "guest-exec", "arguments": map[string]any{
		"path": "/bin/sh", "arg": []string{"-c", script}, "capture-output": true}})
	if err != nil {
		return "", fmt.Errorf("guest: guest-exec %q: %w", script, err)
	}
	var started struct {
		Return struct{ PID int } `json:"return"`
	}
	if err := json.Unmarshal(out, &started); err != nil {
		return "", fmt.Errorf("guest: guest-exec %q: %w: %s", script, err, out)
	}
	var status struct {
		Return struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			OutData  []byte `json:"out-data"` // base64 in the JSON
			ErrData  []byte `json:"err-data"`
		} `json:"return"`
	}
	var forgotten error // the agent restarted: it knows the PID no more
	err = e.node.pollFor(ctx, "guest: "+script+" exited", 2*time.Minute, 500*time.Millisecond, nil, func() error {
		out, err := agentCommand(ctx, e, run, map[string]any{"execute": "guest-exec-status", "arguments": map[string]any{"pid": started.Return.PID}})
		if err != nil && strings.Contains(err.Error(), "Invalid parameter 'pid'") {
			forgotten = err
			return nil
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(out, &status); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if !status.Return.Exited {
			return errors.New("still running")
		}
		return nil
	})
	if err == nil {
		err = forgotten
	}
	if err != nil {
		return "", fmt.Errorf("guest: %q: %w", script, err)
	}
	if status.Return.ExitCode != 0 {
		return "", fmt.Errorf("guest: %q exited %d: %s", script, status.Return.ExitCode, status.Return.ErrData)
	}
	return string(status.Return.OutData), nil
}

// agentCommand sends one command to the guest agent of run's VMI (virsh qemu-agent-command in the compute
// container) and returns the agent's answer.
func agentCommand(ctx context.Context, e *env, run *guestRun, command map[string]any) ([]byte, error) {
	cmd, err := json.Marshal(command)
	if err != nil {
		return nil, err
	}
	return e.node.Kube().Run(ctx, nil, "exec", "-n", "default", run.pod.Name, "-c", "compute", "--", "virsh", "-c",
		libvirtURI, "qemu-agent-command", "default_"+run.vmi.Name, string(cmd))
}

// libvirtURI is the compute container's libvirt (virt-launcher's non-root virtqemud).
const libvirtURI = "qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock"

// flapMark is the interface the guest adds when it flaps: the guest agent reports it, so its entry in
// vmi.status.interfaces says that the agent's report of the flap has reached the status.
const flapMark = "flapmark"

// flapKind is how the guest flaps the VF: linkLocalOnly drops its IPv4 and global IPv6 (only its link-local
// address stays, the seed's flap); noAddress drops every address, the link-local one too.
type flapKind string

const (
	linkLocalOnly flapKind = "link-local only"
	noAddress     flapKind = "no address"
)

// flap makes the guest flap the VF as kind says and add flapMark; unflap restores the VF (networkd configures
// it again) and removes flapMark. Each waits until its script has exited 0 in the guest, and only then restarts
// the guest agent, from a unit of its own (the agent's restart would stop a child of its own): virt-launcher
// polls the agent's interfaces at once when it connects, then 10 s later, doubling up to 120 s
// (pkg/virt-launcher/virtwrap/agent-poller), so the change reaches the status in seconds, not minutes.
//
// The wait is what keeps a flap: the status may show a script's effect from a regular poll before the script
// has ended (networkd restores the IPv4 address as soon as unflap's link comes up, before unflap restarts
// networkd), and a next flap started then raced the rest of the unflap, whose networkd restart gave the
// no-address flap its link-local address back.
//
// The no-address flap must stay without addresses until unflap: the kernel gives an up link its link-local
// address again when its address-generation mode is written or the link goes down and up (not on a carrier
// change), and networkd (socket-activated by any rtnetlink traffic) may set the generation mode again. So
// networkd and its socket stop first, the link's generation mode is kept in flapGenMode and set to none, and only
// then are the addresses flushed; unflap puts the mode back before the link goes down and up.
func flap(ctx context.Context, e *env, run *guestRun, kind flapKind) error {
	flush := fmt.Sprintf("ip -4 addr flush dev %[1]s; ip -6 addr flush dev %[1]s scope global", run.vfDev)
	if kind == noAddress {
		flush = fmt.Sprintf("systemctl stop systemd-networkd.socket systemd-networkd.service; "+
			"cat %[2]s > %[3]s; ip link set dev %[1]s addrgenmode none; ip -4 addr flush dev %[1]s; ip -6 addr flush dev %[1]s",
			run.vfDev, genModeSysctl(run.vfDev), flapGenMode)
	}
	return guestScript(ctx, e, run, fmt.Sprintf("%[1]s; ip link add %[2]s type dummy || ip link add %[2]s type veth peer name %[2]s-p; "+
		"ip link set %[2]s up", flush, flapMark))
}

func unflap(ctx context.Context, e *env, run *guestRun) error {
	// The link goes down and up first: the kernel gives it its link-local address again only then. The agent
	// restarts once networkd has configured the link again, so that a flap after the agent's report is not undone
	// by networkd's configuration still under way.
	return guestScript(ctx, e, run, fmt.Sprintf("ip link del %[1]s; if [ -e %[3]s ]; then cat %[3]s > %[4]s; rm %[3]s; fi; "+
		"ip link set %[2]s down; ip link set %[2]s up; systemctl restart systemd-networkd; "+
		"/lib/systemd/systemd-networkd-wait-online -i %[2]s --timeout=60",
		flapMark, run.vfDev, flapGenMode, genModeSysctl(run.vfDev)))
}

// guestScript runs script in the guest with `set -e` and waits for it to exit 0, then restarts the guest agent
// (from a unit of its own) and waits until the new agent answers, so that its report of the change comes at
// once and no later command of the test meets the restart (a restart ends the agent's children and forgets
// their guest-exec PIDs).
func guestScript(ctx context.Context, e *env, run *guestRun, script string) error {
	if _, err := guestOutput(ctx, e, run, "set -e; "+script); err != nil {
		return err
	}
	const mainPID = "systemctl show -P MainPID qemu-guest-agent"
	before, err := guestOutput(ctx, e, run, mainPID)
	if err != nil {
		return err
	}
	if err := guestExec(ctx, e, run, "systemd-run --on-active=1 systemctl restart qemu-guest-agent"); err != nil {
		return err
	}
	return e.node.pollFor(ctx, "guest: qemu-guest-agent restarted", 2*time.Minute, time.Second, nil, func() error {
		now, err := guestOutput(ctx, e, run, mainPID)
		if err != nil {
			return err
		}
		if now = strings.TrimSpace(now); now == strings.TrimSpace(before) || now == "0" {
			return fmt.Errorf("qemu-guest-agent's MainPID %s", now)
		}
		return nil
	})
}

// flapGenMode is the guest's file that keeps the VF's IPv6 address generation mode through a no-address flap.
const flapGenMode = "/run/flap-addrgenmode"

// genModeSysctl is the guest's sysctl file of dev's IPv6 address generation mode.
func genModeSysctl(dev string) string {
	return "/proc/sys/net/ipv6/conf/" + dev + "/addr_gen_mode"
}

// guestVF reads the VF's link in the guest now (`ip -j addr` through the guest agent).
func guestVF(ctx context.Context, e *env, run *guestRun) (guest.Link, error) {
	out, err := guestOutput(ctx, e, run, "ip -j addr show dev "+run.vfDev)
	if err != nil {
		return guest.Link{}, err
	}
	links, err := guest.ParseLinks([]byte(out))
	if err != nil {
		return guest.Link{}, fmt.Errorf("guest: %w", err)
	}
	if len(links) != 1 {
		return guest.Link{}, fmt.Errorf("guest: ip -j addr show dev %s: %d links", run.vfDev, len(links))
	}
	return links[0], nil
}

// checkGuestVF re-reads the guest's VF and asserts its addresses: flapped as kind says, or ("") configured with
// the pod's addresses.
func checkGuestVF(ctx context.Context, t *testing.T, e *env, run *guestRun, kind flapKind) {
	t.Helper()
	link, err := guestVF(ctx, e, run)
	require.NoError(t, err)
	var global, linkLocal []string
	for _, a := range link.Addrs {
		if a.Scope == "global" {
			global = append(global, a.Prefix.String())
		} else if a.Prefix.Addr().IsLinkLocalUnicast() {
			linkLocal = append(linkLocal, a.Prefix.String())
		}
	}
	switch kind {
	case "":
		var want []string
		for _, p := range run.net.Prefixes {
			want = append(want, p.String())
		}
		assert.ElementsMatch(t, want, global, "guest: %s configured: %+v", run.vfDev, link.Addrs)
		assert.NotEmpty(t, linkLocal, "guest: %s configured has its link-local address: %+v", run.vfDev, link.Addrs)
	case linkLocalOnly:
		assert.Empty(t, global, "guest: %s flapped (%s): %+v", run.vfDev, kind, link.Addrs)
		assert.NotEmpty(t, linkLocal, "guest: %s flapped (%s) keeps its link-local address: %+v", run.vfDev, kind, link.Addrs)
	case noAddress:
		assert.Empty(t, link.Addrs, "guest: %s flapped (%s): %+v", run.vfDev, kind, link.Addrs)
	}
}

// reported is the watch's condition for the guest agent's report of a flap (flapped) or of its restore.
func reported(flapped bool) func(*kubevirtv1.VirtualMachineInstance) error {
	return func(vmi *kubevirtv1.VirtualMachineInstance) error {
		if hasMark(vmi) != flapped {
			return fmt.Errorf("the agent's report: %s in the status: %v", flapMark, hasMark(vmi))
		}
		return nil
	}
}

// globalIPs are the status entry's IPs of one family without link-local ones.
func globalIPs(st *kubevirtv1.VirtualMachineInstanceNetworkInterface, v4 bool) []string {
	var out []string
	for _, s := range ipsOf(st, v4) {
		if a, _ := netip.ParseAddr(s); !a.IsLinkLocalUnicast() {
			out = append(out, s)
		}
	}
	return out
}

// hasMark says whether the guest agent's report with flapMark is in the status.
func hasMark(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, st := range vmi.Status.Interfaces {
		if st.InterfaceName == flapMark {
			return true
		}
	}
	return false
}

// The whole path of a VM, in the order a user meets it: the guest configures the VF from the ISO KubeVirt built
// from our answer; vmi.status.interfaces with the guest agent on the stock virt-handler and through the seed's
// flap, then on virt-handler with patches/kubevirt; a migration refused; a restart onto a new pod with new
// addresses; then the node's faults under the running VM (faults_test.go).
func TestVM_GuestStatusFlapMigrationRestart(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	resolv := filepath.Join(e.node.Work, "udn-guest-resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("nameserver 192.168.60.53\nnameserver fd60::53\nsearch udn.example\n"), 0o644))
	rootDisk := persistentRoot(ctx, t, e)
	// The same guest without the binding first (the pod NIC only): what the binding adds to a start is a ratio.
	plain := plainGuestVMI()
	t0 := time.Now()
	require.NoError(t, e.node.waitFor(ctx, "KubeVirt: the plain VMI accepted", 2*time.Minute, nil, func() error {
		_, err := e.node.Kube().Run(ctx, []byte(plain), "apply", "-f", "-")
		return err
	}))
	without := awaitGuest(ctx, t, e, "vm-guest-plain", "", t0, false)
	_, err := e.node.Kube().Run(ctx, nil, "delete", "vmi", "vm-guest-plain", "--wait=true", "--timeout=3m")
	require.NoError(t, err)

	t0 = time.Now()
	require.NoError(t, e.node.waitFor(ctx, "KubeVirt: the VM accepted", 2*time.Minute, nil, func() error {
		_, err := e.node.Kube().Run(ctx, []byte(guestVMYAML(resolv, guestVM, true, rootDisk)), "apply", "-f", "-")
		return err
	}))
	t.Cleanup(func() { _, _ = e.node.Kube().Run(ctx, nil, "delete", "vm", guestVM, "--wait=true", "--timeout=3m") })
	run := awaitGuest(ctx, t, e, guestVM, "", t0, true)
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	t.Logf("created -> Running -> guest configured: without the binding %s / %s, with it (and the VF stand-in) %s / %s: %.2fx / %.2fx",
		r(without.toRunning), r(without.toReport), r(run.toRunning), r(run.toReport),
		run.toRunning.Seconds()/without.toRunning.Seconds(), run.toReport.Seconds()/without.toReport.Seconds())

	t.Run("guest configured from the ISO", func(t *testing.T) { checkGuestNetwork(t, run) })
	t.Run("the guest's MTU and resolver on the VF", func(t *testing.T) { checkGuestMTUAndResolver(ctx, t, e, run) })

	t.Run("our sidecar's memory in the real pod", func(t *testing.T) {
		for _, cs := range run.pod.Status.ContainerStatuses {
			if cs.Name != run.sidecar {
				continue
			}
			m, err := e.node.ContainerMemory(strings.TrimPrefix(cs.ContainerID, "containerd://"))
			require.NoError(t, err, "cluster: our sidecar's cgroup")
			mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
			t.Logf("our sidecar (container %s) after the guest booted: usage %s (anon %s, page cache %s), peak %s, limit %s",
				cs.Name, mib(m.Usage), mib(m.RSS), mib(m.Cache), mib(m.MaxUsage), mib(m.Limit))
			// The KubeVirt CR's supportContainerResources (docs/operations.md), as virt-controller rendered them
			// into the pod and kubelet into the container's cgroup.
			want := resource.MustParse(sidecarMemoryLimit)
			for _, c := range run.pod.Spec.Containers {
				if c.Name == run.sidecar {
					assert.Equal(t, want.String(), c.Resources.Limits.Memory().String(), "KubeVirt: the sidecar container's memory limit")
				}
			}
			assert.Equal(t, want.Value(), m.Limit, "kubelet: the sidecar's cgroup memory limit")
			// DESIGN.md section 5: KubeVirt's own sidecar limit, 64M (61 MiB), is the ceiling.
			assert.Less(t, m.MaxUsage, int64(61<<20), "sidecar: its peak in the pod, under KubeVirt's 64M sidecar limit")
			assert.Less(t, m.MaxUsage, m.Limit, "sidecar: its peak under the container's limit")
			return
		}
		t.Fatalf("cluster: no container status of our sidecar %s in pod %s", run.sidecar, run.pod.Name)
	})

	v4, v6 := run.net.addrs()

	// Every state of the VMI from here on, as the apiserver stores them: the flaps' statuses are read from it.
	w := watchVMI(ctx, t, e, guestVM)
	udnVF := func(vmi *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstanceNetworkInterface {
		return statusOf(vmi, "udn-vf")
	}

	t.Run("stock virt-handler: the guest agent's IPs, and both flaps", func(t *testing.T) {
		vmi, _, err := w.until(ctx, 0, "status: udn-vf with the guest agent's IPs", 5*time.Minute, func(vmi *kubevirtv1.VirtualMachineInstance) error {
			if st := udnVF(vmi); st == nil || !strings.Contains(st.InfoSource, "guest-agent") || len(ipsOf(st, true)) == 0 {
				return fmt.Errorf("udn-vf: %+v", st)
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, v4, ipsOf(udnVF(vmi), true), "status: stock takes udn-vf's IPv4 from the guest agent")
		for i, kind := range []flapKind{linkLocalOnly, noAddress} {
			if i > 0 { // restore the guest first; stock takes the agent's IPs again
				from := w.mark()
				require.NoError(t, unflap(ctx, e, run))
				_, _, err = w.until(ctx, from, "status: the guest agent's report of the restore", 5*time.Minute, func(vmi *kubevirtv1.VirtualMachineInstance) error {
					if err := reported(false)(vmi); err != nil {
						return err
					}
					if got := ipsOf(udnVF(vmi), true); !slices.Equal(got, v4) {
						return fmt.Errorf("udn-vf's IPv4 %v", got)
					}
					return nil
				})
				require.NoError(t, err)
				checkGuestVF(ctx, t, e, run, "")
			}
			from := w.mark()
			require.NoError(t, flap(ctx, e, run, kind))
			vmi, _, err = w.until(ctx, from, "status: the guest agent's report of the flap ("+string(kind)+")", 5*time.Minute, reported(true))
			require.NoError(t, err)
			checkGuestVF(ctx, t, e, run, kind)
			t.Logf("stock virt-handler, guest flapped (%s): udn-vf %+v", kind, udnVF(vmi))
			assert.Empty(t, ipsOf(udnVF(vmi), true), "status: on stock KubeVirt the flap (%s) takes udn-vf's IPv4 away (the seed's bug)", kind)
			assert.Empty(t, globalIPs(udnVF(vmi), false), "status: on stock KubeVirt the flap (%s) takes udn-vf's IPv6 away", kind)
		}
	})

	t.Run("patched virt-handler: our cache entry, through both flaps", func(t *testing.T) {
		// The guest is still flapped (no address): once virt-handler with patches/kubevirt runs, the status must
		// hold the cache's addresses while the agent reports none.
		from := w.mark()
		require.NoError(t, e.node.UseVirtHandler(ctx, VirtHandlerPatchedImage), "KubeVirt: virt-handler with patches/kubevirt")
		t.Cleanup(func() {
			assert.NoError(t, e.node.UseVirtHandler(ctx, VirtHandlerStockImage), "KubeVirt: back to the stock virt-handler")
		})
		vmi, kept, err := w.until(ctx, from, "status: udn-vf with our cache's IPs beside the agent's report", 5*time.Minute, func(vmi *kubevirtv1.VirtualMachineInstance) error {
			if st := udnVF(vmi); st == nil || !hasMark(vmi) || len(st.IPs) == 0 {
				return fmt.Errorf("udn-vf: %+v, agent report in: %v", st, hasMark(vmi))
			}
			return nil
		})
		require.NoError(t, err)
		checkGuestVF(ctx, t, e, run, noAddress)
		assert.Equal(t, v4, ipsOf(udnVF(vmi), true), "status: udn-vf's IPv4 from our cache while the guest has no address")
		assert.Equal(t, v6, globalIPs(udnVF(vmi), false), "status: udn-vf's IPv6 from our cache while the guest has no address")
		// The guest restored, flapped the other way, restored again: every state the watch recorded from the
		// first with the cache's IPs on keeps them.
		for _, step := range []struct {
			kind flapKind // "": restore
			do   func() error
		}{
			{"", func() error { return unflap(ctx, e, run) }},
			{linkLocalOnly, func() error { return flap(ctx, e, run, linkLocalOnly) }},
			{"", func() error { return unflap(ctx, e, run) }},
		} {
			from := w.mark()
			require.NoError(t, step.do())
			_, _, err := w.until(ctx, from, fmt.Sprintf("status: the guest agent's report (flapped: %q)", step.kind), 5*time.Minute, reported(step.kind != ""))
			require.NoError(t, err)
			checkGuestVF(ctx, t, e, run, step.kind)
		}
		states := w.since(kept)
		for _, vmi := range states {
			st := udnVF(vmi)
			assert.Equal(t, v4, ipsOf(st, true), "status: udn-vf's IPv4 at resourceVersion %s: %+v", vmi.ResourceVersion, st)
			assert.Subset(t, globalIPs(st, false), v6, "status: udn-vf's IPv6 at resourceVersion %s: %+v", vmi.ResourceVersion, st)
		}
		t.Logf("patched virt-handler: udn-vf kept %v %v through every one of %d VMI states (no address, restored, link-local only, restored)", v4, v6, len(states))
	})

	t.Run("migration refused, the VM still running with its NIC", func(t *testing.T) {
		vmim := fmt.Sprintf("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\nmetadata: {name: mig-guest, namespace: default}\nspec: {vmiName: %s}\n", guestVM)
		out, err := e.node.Kube().Run(ctx, []byte(vmim), "create", "-f", "-")
		require.Error(t, err, "KubeVirt: the migration was admitted: %s", out)
		assert.ErrorContains(t, err, "has interfaces that use the sriov-udn binding", "status: the refusal is our policy's (kubectl's stderr)")
		vmi, err := vmiNow(ctx, e, guestVM)
		require.NoError(t, err)
		assert.Equal(t, kubevirtv1.Running, vmi.Status.Phase)
		assert.Nil(t, vmi.Status.MigrationState, "KubeVirt: no migration started")
	})

	t.Run("migration without our policy: KubeVirt's own outcome, the VF network kept", func(t *testing.T) {
		withoutMigrationPolicy(ctx, t, e)
		// KubeVirt gives the target pod a required anti-affinity to the source's node, so on one node it stays
		// Unschedulable; the annotation shortens KubeVirt's wait for it from 300 s
		// (pkg/virt-controller/watch/migration/migration.go, MigrationUnschedulablePodTimeoutSecondsAnnotation).
		vmim := fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceMigration
metadata: {name: mig-guest-nopolicy, namespace: default, annotations: {kubevirt.io/migrationUnschedulablePodTimeoutSeconds: "20"}}
spec: {vmiName: %s}
`, guestVM)
		t.Cleanup(func() {
			_, _ = e.node.Kube().Run(ctx, nil, "delete", "vmim", "mig-guest-nopolicy", "--ignore-not-found")
		})
		// The apiserver drops a deleted policy binding from its cache within seconds: until then it refuses.
		require.NoError(t, e.node.pollFor(ctx, "KubeVirt: the migration admitted without our policy", time.Minute, time.Second, nil, func() error {
			_, err := e.node.Kube().Run(ctx, []byte(vmim), "create", "-f", "-")
			return err
		}))
		var mig kubevirtv1.VirtualMachineInstanceMigration
		require.NoError(t, e.node.pollFor(ctx, "KubeVirt: the migration ends", 5*time.Minute, 2*time.Second, nil, func() error {
			if err := e.node.Kube().GetJSON(ctx, &mig, "vmim", "mig-guest-nopolicy"); err != nil {
				return err
			}
			if !mig.IsFinal() {
				return fmt.Errorf("phase %q", mig.Status.Phase)
			}
			return nil
		}))
		events, err := e.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=VirtualMachineInstanceMigration,involvedObject.name=mig-guest-nopolicy"})
		require.NoError(t, err)
		var reasons []string
		for _, ev := range events.Items {
			reasons = append(reasons, ev.Reason+": "+ev.Message)
		}
		t.Logf("KubeVirt ended the migration %s: %v", mig.Status.Phase, reasons)
		assert.Equal(t, kubevirtv1.MigrationFailed, mig.Status.Phase, "KubeVirt: the migration's outcome on one node")
		assert.Contains(t, reasons, fmt.Sprintf("migrationTargetPodUnschedulable: Migration target pod for VMI [default/%s] is currently unschedulable.", guestVM), "KubeVirt: the migration's events")
		assert.Contains(t, reasons, "FailedMigration: Migration target pod was removed during active migration.", "KubeVirt: the migration's events")
		vmi, err := vmiNow(ctx, e, guestVM)
		require.NoError(t, err)
		// What our policy is there for: KubeVirt itself finds nothing against migrating the VM (it checks only the
		// pod network's interface), so on a second node the VF would be migrated away and not come back.
		for _, c := range vmi.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable {
				assert.Equal(t, corev1.ConditionTrue, c.Status, "KubeVirt: LiveMigratable (%s: %s)", c.Reason, c.Message)
			}
		}
		assert.Equal(t, kubevirtv1.Running, vmi.Status.Phase)
		assert.Equal(t, run.vmi.UID, vmi.UID, "KubeVirt: the same VMI")
		assert.Equal(t, []types.UID{run.pod.UID}, slices.Collect(maps.Keys(vmi.Status.ActivePods)), "KubeVirt: the VMI's pods, the target's gone")
		checkGuestVF(ctx, t, e, run, "")
	})

	restarted := t.Run("restart on the same root onto a new pod with new addresses", func(t *testing.T) {
		old := run
		// A mark on the root, written through before the VMI goes: the second boot must find it.
		mark := string(old.vmi.UID)
		got, err := guestOutput(ctx, e, old, "echo "+mark+" >/var/lib/udn-first-run && sync && cat /var/lib/udn-first-run")
		require.NoError(t, err, "guest: the mark on the root")
		require.Equal(t, mark, strings.TrimSpace(got), "guest: the mark on the root")
		_, err = e.node.Kube().Run(ctx, nil, "delete", "vmi", guestVM, "--wait=true", "--timeout=3m")
		require.NoError(t, err, "KubeVirt: delete the VMI")
		run = awaitGuest(ctx, t, e, guestVM, string(old.vmi.UID), time.Now(), true)
		assert.NotEqual(t, old.pod.UID, run.pod.UID)
		got, err = guestOutput(ctx, e, run, "cat /var/lib/udn-first-run")
		require.NoError(t, err, "guest: the first run's mark on the root")
		assert.Equal(t, mark, strings.TrimSpace(got), "guest: the second boot is on the first one's root")
		for _, p := range run.net.Prefixes {
			assert.NotContains(t, old.net.Prefixes, p, "cluster: the new pod got new addresses")
		}
		checkGuestNetwork(t, run)
	})
	if restarted { // the faults need the restarted VM
		faultsUnderTheRunningVM(ctx, t, e, run)
	}
}

// migrationPolicyBinding is the binding of manifests/policy/migration-policy.yaml's policy that refuses a
// migration of a VMI with our binding.
const migrationPolicyBinding = "sriov-udn-binding-migration.kubevirt.io"

// withoutMigrationPolicy deletes the binding of our migration policy until the test ends; then it creates it
// again as it was and waits until the apiserver refuses a migration of the VM again (a server-side dry run).
func withoutMigrationPolicy(ctx context.Context, t *testing.T, e *env) {
	t.Helper()
	var saved map[string]any
	require.NoError(t, e.node.Kube().GetJSON(ctx, &saved, "validatingadmissionpolicybinding", migrationPolicyBinding), "cluster: our migration policy's binding")
	meta, _ := saved["metadata"].(map[string]any)
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"} {
		delete(meta, k)
	}
	delete(saved, "status")
	again, err := json.Marshal(saved)
	require.NoError(t, err)
	_, err = e.node.Kube().Run(ctx, nil, "delete", "validatingadmissionpolicybinding", migrationPolicyBinding)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := e.node.Kube().Run(ctx, again, "create", "-f", "-")
		require.NoError(t, err, "cluster: our migration policy's binding again")
		vmim := fmt.Sprintf("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\nmetadata: {name: mig-dry-run, namespace: default}\nspec: {vmiName: %s}\n", guestVM)
		assert.NoError(t, e.node.pollFor(ctx, "the apiserver: our migration policy in force again", time.Minute, time.Second, nil, func() error {
			_, err := e.node.Kube().Run(ctx, []byte(vmim), "create", "--dry-run=server", "-f", "-")
			if err == nil {
				return errors.New("a migration of our VM admitted")
			}
			if !strings.Contains(err.Error(), "has interfaces that use the sriov-udn binding") {
				return err
			}
			return nil
		}))
	})
}

// persistentRoot copies the guest image's raw root (test/guest's cache) into the node's work dir, owned by qemu
// (uid 107, as virt-launcher runs it), and returns its path: the hostDisk the VM's restart boots again.
func persistentRoot(ctx context.Context, t *testing.T, e *env) string {
	t.Helper()
	img, _, err := guest.EnsureImage(ctx, guestCacheDir(), guest.ClusterImageSpec(), t.Logf)
	require.NoError(t, err, "cluster: the guest image")
	dir := filepath.Join(e.node.Work, "disks", guestVM)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	disk := filepath.Join(dir, "disk.img")
	out, err := exec.CommandContext(ctx, "cp", "--sparse=always", img.Root, disk).CombinedOutput()
	require.NoError(t, err, "cluster: copy the guest's root: %s", out)
	require.NoError(t, os.Chown(disk, 107, 107))
	require.NoError(t, os.Chmod(disk, 0o660))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return disk
}
