package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
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
// statusAlias labels its VMI with standinAliasLabel=kubevirt.
func guestVMYAML(resolvConf, name string, statusAlias bool) string {
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
      - {name: root, containerDisk: {image: "%[10]s", imagePullPolicy: IfNotPresent}}
      - {name: cloudinit, cloudInitNoCloud: {userData: "#cloud-config\n"}}
`, guestNAD, resolvConf, name, guest.ClusterKernelArgs, GuestKernelImage, GuestKernelPath, GuestInitrdPath,
		guestPodMAC, guestVFMAC, GuestDiskImage, labels)
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

// checkGuestMTUAndSearch asserts the VF's MTU (the report's `ip -j addr`) and the search domains of networkd's
// unit for it (Domains=) against network-status.
func checkGuestMTUAndSearch(t *testing.T, run *guestRun) {
	t.Helper()
	require.NotZero(t, run.net.MTU, "cluster (CNI stand-in): network-status gives the VF network an mtu")
	link, _ := run.report.LinkByMAC(guestVFMAC)
	assert.Equal(t, run.net.MTU, link.MTU, "guest: %s's MTU against network-status's\n%s", link.Name, run.report)
	require.NotEmpty(t, run.net.Search, "cluster: network-status gives the VF network search domains")
	_, unit, ok := run.report.NetworkdUnitFor(guestVFMAC)
	require.True(t, ok, "guest: a networkd unit for the VF\n%s", run.report)
	var domains []string
	for _, v := range guest.UnitValues(unit, "Domains") {
		domains = append(domains, strings.Fields(v)...)
	}
	assert.ElementsMatch(t, run.net.Search, domains, "guest: networkd's Domains= against network-status's search\n%s", unit)
}

// guestExec runs a shell command in the guest through QEMU's guest agent (guest-exec, from the compute
// container's virsh), without waiting for it to finish: the command may take the guest's network down.
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
	err = e.node.pollFor(ctx, "guest: "+script+" exited", time.Minute, 200*time.Millisecond, nil, func() error {
		out, err := agentCommand(ctx, e, run, map[string]any{"execute": "guest-exec-status", "arguments": map[string]any{"pid": started.Return.PID}})
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
	if err != nil {
		return "", err
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

// flap makes the guest drop the VF's IPv4 and global IPv6 (only its link-local address stays, the seed's
// flap) and add flapMark; unflap restores the VF (networkd configures it again) and removes flapMark. Each then
// restarts the guest agent, from a unit of its own (the agent's restart would stop a child of its own): virt-launcher
// polls the agent's interfaces at once when it connects, then 10 s later, doubling up to 120 s
// (pkg/virt-launcher/virtwrap/agent-poller), so the change reaches the status in seconds, not minutes.
func flap(ctx context.Context, e *env, run *guestRun) error {
	return guestExec(ctx, e, run, fmt.Sprintf("ip -4 addr flush dev %[1]s; ip -6 addr flush dev %[1]s scope global; "+
		"ip link add %[2]s type dummy || ip link add %[2]s type veth peer name %[2]s-p; ip link set %[2]s up; %[3]s",
		run.vfDev, flapMark, restartAgent(2)))
}

func unflap(ctx context.Context, e *env, run *guestRun) error {
	return guestExec(ctx, e, run, fmt.Sprintf("ip link del %s; systemctl restart systemd-networkd; %s", flapMark, restartAgent(5)))
}

// restartAgent is the guest's command that restarts qemu-guest-agent after seconds, from a transient unit.
func restartAgent(seconds int) string {
	return fmt.Sprintf("systemd-run --on-active=%d systemctl restart qemu-guest-agent", seconds)
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
// addresses.
func TestVM_GuestStatusFlapMigrationRestart(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	resolv := filepath.Join(e.node.Work, "udn-guest-resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("nameserver 192.168.60.53\nnameserver fd60::53\nsearch udn.example\n"), 0o644))
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
		_, err := e.node.Kube().Run(ctx, []byte(guestVMYAML(resolv, guestVM, true)), "apply", "-f", "-")
		return err
	}))
	t.Cleanup(func() { _, _ = e.node.Kube().Run(ctx, nil, "delete", "vm", guestVM, "--wait=true", "--timeout=3m") })
	run := awaitGuest(ctx, t, e, guestVM, "", t0, true)
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	t.Logf("created -> Running -> guest configured: without the binding %s / %s, with it (and the VF stand-in) %s / %s: %.2fx / %.2fx",
		r(without.toRunning), r(without.toReport), r(run.toRunning), r(run.toReport),
		run.toRunning.Seconds()/without.toRunning.Seconds(), run.toReport.Seconds()/without.toReport.Seconds())

	t.Run("guest configured from the ISO", func(t *testing.T) { checkGuestNetwork(t, run) })
	t.Run("the guest's MTU and search domains on the VF", func(t *testing.T) { checkGuestMTUAndSearch(t, run) })

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

	var v4, v6 []string
	for _, p := range run.net.Prefixes {
		if p.Addr().Is4() {
			v4 = append(v4, p.Addr().String())
		} else {
			v6 = append(v6, p.Addr().String())
		}
	}

	t.Run("stock virt-handler: the guest agent's IPs, and the flap", func(t *testing.T) {
		var last *kubevirtv1.VirtualMachineInstance
		err := e.node.pollFor(ctx, "status: udn-vf with the guest agent's IPs", 5*time.Minute, 2*time.Second, nil, func() error {
			vmi, err := vmiNow(ctx, e, guestVM)
			if err != nil {
				return err
			}
			last = vmi
			st := statusOf(vmi, "udn-vf")
			if st == nil || !strings.Contains(st.InfoSource, "guest-agent") || len(ipsOf(st, true)) == 0 {
				return fmt.Errorf("udn-vf: %+v", st)
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, v4, ipsOf(statusOf(last, "udn-vf"), true), "status: stock takes udn-vf's IPv4 from the guest agent")
		require.NoError(t, flap(ctx, e, run))
		err = e.node.pollFor(ctx, "status: the guest agent's report of the flap", 5*time.Minute, 2*time.Second, nil, func() error {
			vmi, err := vmiNow(ctx, e, guestVM)
			if err != nil {
				return err
			}
			last = vmi
			if !hasMark(vmi) {
				return fmt.Errorf("no %s entry yet", flapMark)
			}
			return nil
		})
		require.NoError(t, err)
		st := statusOf(last, "udn-vf")
		t.Logf("stock virt-handler, guest flapped: udn-vf %+v", st)
		assert.Empty(t, ipsOf(st, true), "status: on stock KubeVirt the flap takes udn-vf's IPv4 away (the seed's bug)")
	})

	t.Run("patched virt-handler: our cache entry, through the flap", func(t *testing.T) {
		require.NoError(t, e.node.UseVirtHandler(ctx, VirtHandlerPatchedImage), "KubeVirt: virt-handler with patches/kubevirt")
		t.Cleanup(func() {
			assert.NoError(t, e.node.UseVirtHandler(ctx, VirtHandlerStockImage), "KubeVirt: back to the stock virt-handler")
		})
		// The guest is still flapped: the status must hold the cache's addresses while the agent reports none.
		var last *kubevirtv1.VirtualMachineInstance
		err := e.node.pollFor(ctx, "status: udn-vf with our cache's IPs beside the agent's report", 5*time.Minute, 2*time.Second, nil, func() error {
			vmi, err := vmiNow(ctx, e, guestVM)
			if err != nil {
				return err
			}
			last = vmi
			st := statusOf(vmi, "udn-vf")
			if st == nil || !hasMark(vmi) || len(st.IPs) == 0 {
				return fmt.Errorf("udn-vf: %+v, agent report in: %v", st, hasMark(vmi))
			}
			return nil
		})
		require.NoError(t, err)
		st := statusOf(last, "udn-vf")
		assert.Equal(t, v4, ipsOf(st, true), "status: udn-vf's IPv4 from our cache while the guest has none")
		assert.Equal(t, v6, ipsOf(st, false), "status: udn-vf's IPv6 from our cache while the guest has only a link-local one")
		// Across the guest's restore and a second flap: a bounded watch of every status the VMI goes through.
		require.NoError(t, unflap(ctx, e, run))
		seen, flapped := map[string]bool{}, false
		var left error
		err = e.node.pollFor(ctx, "status: the guest agent's reports of the restore and a second flap", 6*time.Minute, 2*time.Second, nil, func() error {
			vmi, err := vmiNow(ctx, e, guestVM)
			if err != nil {
				return err
			}
			last = vmi
			if !seen[vmi.ResourceVersion] {
				seen[vmi.ResourceVersion] = true
				if got := ipsOf(statusOf(vmi, "udn-vf"), true); !slices.Equal(got, v4) {
					left = fmt.Errorf("status: udn-vf's IPv4 is %v at resourceVersion %s: %+v", got, vmi.ResourceVersion, statusOf(vmi, "udn-vf"))
					return nil // ends the watch; reported below
				}
			}
			switch {
			case !flapped && !hasMark(vmi): // the agent reported the restore: flap again
				if err := flap(ctx, e, run); err != nil {
					return err
				}
				flapped = true
				return fmt.Errorf("flapped again")
			case flapped && hasMark(vmi):
				return nil
			}
			return fmt.Errorf("waiting for the agent's report (flapped again: %v)", flapped)
		})
		require.NoError(t, left)
		require.NoError(t, err, "%d VMI states seen", len(seen))
		t.Logf("patched virt-handler: udn-vf kept %v through %d VMI states (guest restored, then flapped again)", v4, len(seen))
		require.NoError(t, unflap(ctx, e, run))
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

	t.Run("restart onto a new pod with new addresses", func(t *testing.T) {
		old := run
		_, err := e.node.Kube().Run(ctx, nil, "delete", "vmi", guestVM, "--wait=true", "--timeout=3m")
		require.NoError(t, err, "KubeVirt: delete the VMI")
		run = awaitGuest(ctx, t, e, guestVM, string(old.vmi.UID), time.Now(), true)
		assert.NotEqual(t, old.pod.UID, run.pod.UID)
		for _, p := range run.net.Prefixes {
			assert.NotContains(t, old.net.Prefixes, p, "cluster: the new pod got new addresses")
		}
		checkGuestNetwork(t, run)
	})
}
