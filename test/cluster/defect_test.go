package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
)

// defectVM is the VM of TestVM_NICHotplugDefect: the guest VM of vm_test.go without the stand-in's alias label,
// so that its domain, as on a node, holds no <interface> for the VF.
const defectVM = "vm-defect"

// dummyDomainError is what stock virt-launcher's SyncVMI fails with when its NIC hot-plug picks an interface
// it cannot plug (pkg/virt-launcher/virtwrap/network/nichotplug.go, v1.8.4).
const dummyDomainError = "could not retrieve the api.Interface object from the dummy domain"

// syncFailures returns the SyncFailed events of the VMI of uid (each counted as many times as it happened),
// and the message of the newest.
func syncFailures(ctx context.Context, e *env, uid string) (int, string, error) {
	events, err := e.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid})
	if err != nil {
		return 0, "", err
	}
	n, msg, newest := 0, "", time.Time{}
	for _, ev := range events.Items {
		if ev.Reason != kubevirtv1.SyncFailed.String() {
			continue
		}
		n += int(max(ev.Count, 1))
		if ev.LastTimestamp.Time.After(newest) || msg == "" {
			newest, msg = ev.LastTimestamp.Time, ev.Message
		}
	}
	return n, msg, nil
}

// hotplugAttempts counts the times since `since` that virt-launcher of run's pod picked the interface iface for
// NIC hot-plug (its compute container's log line "will hot plug <iface>",
// pkg/virt-launcher/virtwrap/network/nichotplug.go): each is a SyncVMI that got that far. virt-handler's SyncFailed
// events cannot count syncs: client-go's recorder drops an object's events after a burst of 25 (one more every
// 5 minutes).
func hotplugAttempts(ctx context.Context, e *env, run *guestRun, iface string, since time.Time) (int, error) {
	out, err := e.node.Kube().Run(ctx, nil, "logs", "-n", "default", run.pod.Name, "-c", "compute")
	if err != nil {
		return 0, fmt.Errorf("virt-launcher's log: %w", err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		var entry struct {
			Msg       string    `json:"msg"`
			Timestamp time.Time `json:"timestamp"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "will hot plug "+iface && !entry.Timestamp.Before(since) {
			n++
		}
	}
	return n, nil
}

// runningDomain is the domain of run's VMI as libvirt runs it (virsh dumpxml in the compute container).
func runningDomain(ctx context.Context, e *env, run *guestRun) (*libvirtxml.Domain, error) {
	out, err := e.node.Kube().Run(ctx, nil, "exec", "-n", "default", run.pod.Name, "-c", "compute", "--", "virsh", "-c", libvirtURI,
		"dumpxml", "default_"+run.vmi.Name)
	if err != nil {
		return nil, fmt.Errorf("libvirt: dumpxml: %w", err)
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(string(out)); err != nil {
		return nil, fmt.Errorf("libvirt: dumpxml: %w", err)
	}
	return &dom, nil
}

// domainInterface is the domain's <interface> of alias, or nil.
func domainInterface(dom *libvirtxml.Domain, alias string) *libvirtxml.DomainInterface {
	for i, nic := range dom.Devices.Interfaces {
		if nic.Alias != nil && nic.Alias.Name == alias {
			return &dom.Devices.Interfaces[i]
		}
	}
	return nil
}

// linkDown says whether libvirt holds the NIC's link down.
func linkDown(nic *libvirtxml.DomainInterface) bool {
	return nic.Link != nil && nic.Link.State == "down"
}

// guestLink is the guest's own line for the link of mac (`ip -o link`), and whether it has carrier.
func guestLink(ctx context.Context, e *env, run *guestRun, mac string) (string, bool, error) {
	out, err := guestOutput(ctx, e, run, "ip -o link show")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "link/ether "+mac) {
			return line, !strings.Contains(line, "NO-CARRIER"), nil
		}
	}
	return "", false, fmt.Errorf("guest: no link of MAC %s in:\n%s", mac, out)
}

// setPodNICState sets the state of the VM's pod NIC (interface 0, "default"): "down" or "up". KubeVirt's VM
// controller carries it to the VMI's spec (pkg/network/controllers/vm.go), and virt-launcher's SyncVMI to the
// domain (updateDomainLinkState), after network.Sync.
func setPodNICState(ctx context.Context, e *env, vm, state string) error {
	_, err := e.node.Kube().Run(ctx, nil, "patch", "vm", vm, "--type", "json", "-p",
		fmt.Sprintf(`[{"op": "add", "path": "/spec/template/spec/domain/devices/interfaces/0/state", "value": %q}]`, state))
	return err
}

// vmiPodNICState waits until the VMI's spec has the pod NIC in state (KubeVirt's VM controller carried it).
func vmiPodNICState(ctx context.Context, e *env, name, state string) error {
	return e.node.pollFor(ctx, "KubeVirt: the VMI's pod NIC in state "+state, 2*time.Minute, time.Second, nil, func() error {
		vmi, err := vmiNow(ctx, e, name)
		if err != nil {
			return err
		}
		got := string(vmi.Spec.Domain.Devices.Interfaces[0].State)
		if got != state {
			return fmt.Errorf("state %q", got)
		}
		return nil
	})
}

// What a node does to a VM with our binding on stock KubeVirt, and what patches/kubevirt 0005 changes: the VF is
// a <hostdev> (the stand-in's emulated NIC carries an alias of its own), so no domain <interface> carries the
// VF interface's name, and stock virt-launcher's NIC hot-plug picks it on every SyncVMI and fails with the
// dummy-domain error before it applies link states. With 0005's virt-launcher the sync succeeds and a pod NIC
// set down goes down, in libvirt and in the guest.
func TestVM_NICHotplugDefect_StockLauncherFailsEverySync_0005Fixes(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	require.NoError(t, e.node.UseVirtLauncher(ctx, VirtLauncherStockImage), "KubeVirt: the stock virt-launcher")
	resolv := filepath.Join(e.node.Work, "udn-defect-resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("nameserver 192.168.60.53\n"), 0o644))
	_, err := e.node.Kube().Run(ctx, []byte(hotNAD), "apply", "-f", "-")
	require.NoError(t, err, "cluster: the hot-plugged NIC's NAD")
	t0 := time.Now()
	require.NoError(t, e.node.waitFor(ctx, "KubeVirt: the VM accepted", 2*time.Minute, nil, func() error {
		_, err := e.node.Kube().Run(ctx, []byte(guestVMYAML(resolv, defectVM, false, "")), "apply", "-f", "-")
		return err
	}))
	t.Cleanup(func() {
		_, _ = e.node.Kube().Run(ctx, nil, "delete", "vm", defectVM, "--wait=true", "--timeout=3m")
		assert.NoError(t, e.node.UseVirtLauncher(ctx, VirtLauncherStockImage), "KubeVirt: back to the stock virt-launcher")
	})
	run := awaitGuest(ctx, t, e, defectVM, "", t0, true) // the guest has a link of the VF's MAC
	uid := string(run.vmi.UID)
	stockLauncher := imageID(run.pod, "compute")
	require.NotEmpty(t, stockLauncher, "kubelet: the compute container's image")

	t.Run("the domain has no <interface> of the VF, as on a node", func(t *testing.T) {
		dom, err := runningDomain(ctx, e, run)
		require.NoError(t, err)
		assert.Nil(t, domainInterface(dom, "ua-udn-vf"), "an <interface> carries the VF interface's alias")
		assert.NotNil(t, domainInterface(dom, "ua-vfstandin-udn-vf"), "the stand-in's NIC")
		assert.NotNil(t, domainInterface(dom, "ua-default"), "the pod NIC")
	})

	t.Run("stock virt-launcher: every sync fails with the dummy-domain error", func(t *testing.T) {
		var msg string
		require.NoError(t, e.node.pollFor(ctx, "virt-handler: a SyncFailed event of "+defectVM, 3*time.Minute, time.Second, nil, func() error {
			var n int
			var err error
			if n, msg, err = syncFailures(ctx, e, uid); err != nil || n == 0 {
				return fmt.Errorf("%d SyncFailed events (%v)", n, err)
			}
			return nil
		}))
		t.Logf("SyncFailed: %s", msg)
		assert.Contains(t, msg, dummyDomainError)
		n, err := hotplugAttempts(ctx, e, run, "udn-vf", time.Time{})
		require.NoError(t, err)
		assert.Positive(t, n, "virt-launcher: our interface picked for NIC hot-plug")
	})

	t.Run("stock virt-launcher: a pod NIC set down stays up", func(t *testing.T) {
		require.NoError(t, setPodNICState(ctx, e, defectVM, "down"))
		require.NoError(t, vmiPodNICState(ctx, e, defectVM, "down"))
		// A sync that saw the new state has run, and failed at our interface, once virt-launcher picks it for
		// hot-plug after the VMI's change was seen. A VMI update makes virt-handler sync at once (its failed
		// syncs are retried with a growing backoff): an annotation of the test's own is that update.
		since := time.Now()
		_, err := e.node.Kube().Run(ctx, nil, "annotate", "vmi", defectVM, "--overwrite", "cluster.sriov-udn.test/sync="+since.Format(time.RFC3339Nano))
		require.NoError(t, err)
		require.NoError(t, e.node.pollFor(ctx, "virt-launcher: a sync of the VMI with its pod NIC down", 3*time.Minute, time.Second, nil, func() error {
			n, err := hotplugAttempts(ctx, e, run, "udn-vf", since)
			if err != nil || n == 0 {
				return fmt.Errorf("%d hot-plug attempts of udn-vf since %s (%v)", n, since.Format(time.RFC3339Nano), err)
			}
			return nil
		}))
		dom, err := runningDomain(ctx, e, run)
		require.NoError(t, err)
		nic := domainInterface(dom, "ua-default")
		require.NotNil(t, nic)
		assert.False(t, linkDown(nic), "libvirt: the pod NIC's link is down")
		line, carrier, err := guestLink(ctx, e, run, guestPodMAC)
		require.NoError(t, err)
		assert.True(t, carrier, "guest: the pod NIC lost its carrier: %s", line)
	})

	t.Run("stock virt-launcher: a hot-plugged bridge NIC attaches only by the map's order, and every sync still fails", func(t *testing.T) {
		since := time.Now()
		hotplugged(ctx, t, e, defectVM)
		// The stand-in published it, so KubeVirt takes it for a NIC to plug (the VMI's status, multus-status).
		require.NoError(t, e.node.pollFor(ctx, "KubeVirt: "+hotNIC+" in the VMI's status from network-status", 3*time.Minute, time.Second, nil, func() error {
			vmi, err := vmiNow(ctx, e, defectVM)
			if err != nil {
				return err
			}
			if hotNICStatus(vmi) == nil {
				return fmt.Errorf("%s: %+v", hotNIC, statusOf(vmi, hotNIC))
			}
			return nil
		}))
		// Each SyncVMI walks a map of the NICs to plug and returns at our interface's error: hot1 is plugged
		// on a sync that happens to reach it first. After it is in the domain, every sync still fails.
		var dom *libvirtxml.Domain
		var attached time.Time
		require.NoError(t, e.node.pollFor(ctx, "virt-launcher: "+hotNIC+" attached, and a sync failing after it", 5*time.Minute, time.Second, nil, func() error {
			var err error
			if dom, err = runningDomain(ctx, e, run); err != nil {
				return err
			}
			if domainInterface(dom, "ua-"+hotNIC) == nil {
				return fmt.Errorf("%s not in the domain", hotNIC)
			}
			if attached.IsZero() {
				attached = time.Now()
			}
			n, err := hotplugAttempts(ctx, e, run, "udn-vf", attached)
			if err != nil || n == 0 {
				return fmt.Errorf("no hot-plug attempt of udn-vf since %s attached (%v)", hotNIC, err)
			}
			return nil
		}))
		before, err := hotplugAttempts(ctx, e, run, "udn-vf", since)
		require.NoError(t, err)
		t.Logf("stock virt-launcher: %s attached %s after the hot-plug, with %d syncs picking udn-vf meanwhile (each failed)",
			hotNIC, attached.Sub(since).Round(time.Second), before)
		n, msg, err := syncFailures(ctx, e, uid)
		require.NoError(t, err)
		assert.Contains(t, msg, dummyDomainError, "virt-handler: the newest of %d SyncFailed events", n)
	})

	require.NoError(t, e.node.UseVirtLauncher(ctx, VirtLauncherPatchedImage), "KubeVirt: virt-launcher with patches/kubevirt")
	require.NoError(t, setPodNICState(ctx, e, defectVM, "up"))
	require.NoError(t, vmiPodNICState(ctx, e, defectVM, "up"))
	t0 = time.Now()
	_, err = e.node.Kube().Run(ctx, nil, "delete", "vmi", defectVM, "--wait=true", "--timeout=3m")
	require.NoError(t, err, "KubeVirt: restart the VM onto a pod of the patched virt-launcher")
	run = awaitGuest(ctx, t, e, defectVM, uid, t0, true)
	uid = string(run.vmi.UID)

	t.Run("patched virt-launcher (0005): a pod NIC set down goes down, and no sync fails", func(t *testing.T) {
		patched := imageID(run.pod, "compute")
		require.NotEmpty(t, patched, "kubelet: the compute container's image")
		require.NotEqual(t, stockLauncher, patched, "kubelet ran the stock virt-launcher again")
		require.NoError(t, setPodNICState(ctx, e, defectVM, "down"))
		require.NoError(t, vmiPodNICState(ctx, e, defectVM, "down"))
		var nic *libvirtxml.DomainInterface
		require.NoError(t, e.node.pollFor(ctx, "libvirt: the pod NIC's link down", 3*time.Minute, time.Second, nil, func() error {
			dom, err := runningDomain(ctx, e, run)
			if err != nil {
				return err
			}
			if nic = domainInterface(dom, "ua-default"); nic == nil || !linkDown(nic) {
				return fmt.Errorf("link up")
			}
			return nil
		}))
		line, carrier, err := guestLink(ctx, e, run, guestPodMAC)
		require.NoError(t, err)
		assert.False(t, carrier, "guest: the pod NIC has carrier: %s", line)
		patchedSyncsClean(ctx, t, e, run, uid)
		dom, err := runningDomain(ctx, e, run)
		require.NoError(t, err)
		assert.Nil(t, domainInterface(dom, "ua-udn-vf"), "an <interface> carries the VF interface's alias")
	})

	t.Run("patched virt-launcher (0005): a hot-plugged bridge NIC reaches the guest, and no sync fails", func(t *testing.T) {
		hotplugged(ctx, t, e, defectVM)
		require.NoError(t, e.node.pollFor(ctx, "libvirt: "+hotNIC+" in the domain", 3*time.Minute, time.Second, nil, func() error {
			dom, err := runningDomain(ctx, e, run)
			if err != nil {
				return err
			}
			if domainInterface(dom, "ua-"+hotNIC) == nil {
				return fmt.Errorf("%s not in the domain", hotNIC)
			}
			return nil
		}))
		var line string
		require.NoError(t, e.node.pollFor(ctx, "guest: a link of "+hotNIC+"'s MAC", 2*time.Minute, 2*time.Second, nil, func() error {
			var err error
			line, _, err = guestLink(ctx, e, run, hotNICMAC)
			return err
		}))
		t.Logf("guest: %s", line)
		vmi, err := vmiNow(ctx, e, defectVM)
		require.NoError(t, err)
		st := hotNICStatus(vmi)
		require.NotNil(t, st, "KubeVirt: %s in the VMI's status", hotNIC)
		assert.Equal(t, hotNICMAC, st.MAC)
		patchedSyncsClean(ctx, t, e, run, uid)
	})
}

// The bridge network hot-plugged into the running VM (KubeVirt's bridge binding on a node bridge of the CNI
// stand-in): the VM interface, its MAC and its NAD. test/cmd/cluster-cni's hotplug controller plays Multus'
// dynamic networks controller for it.
const (
	hotNIC    = "hot1"
	hotNICMAC = "02:00:00:aa:0b:01"
	hotNAD    = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: hotbr, namespace: default}
spec:
  config: '{"cniVersion": "1.0.0", "name": "hotbr", "type": "bridge", "bridge": "br-hot"}'
`
)

// hotplugNIC adds the bridge NIC hotNIC to the running VM, as KubeVirt's user guide hot-plugs one: an interface
// and its network added to the VM's template, which KubeVirt's VM controller carries into the VMI
// (pkg/network/controllers/vm.go) and virt-controller into the pod's networks annotation.
func hotplugNIC(ctx context.Context, e *env, vm string) error {
	_, err := e.node.Kube().Run(ctx, nil, "patch", "vm", vm, "--type", "json", "-p", fmt.Sprintf(`[
{"op": "add", "path": "/spec/template/spec/domain/devices/interfaces/-", "value": {"name": %[1]q, "bridge": {}, "macAddress": %[2]q}},
{"op": "add", "path": "/spec/template/spec/networks/-", "value": {"name": %[1]q, "multus": {"networkName": "hotbr"}}}]`, hotNIC, hotNICMAC))
	return err
}

// hotplugged skips the test where the kernel cannot run KubeVirt's bridge binding (bridgeBindingSupported), and
// otherwise hot-plugs hotNIC into the VM vm, taking it out of the VM's template again when the test ends.
func hotplugged(ctx context.Context, t *testing.T, e *env, vm string) {
	t.Helper()
	if ok, why := bridgeBindingSupported(ctx); !ok {
		t.Skip(why)
	}
	require.NoError(t, hotplugNIC(ctx, e, vm))
	t.Cleanup(func() {
		assert.NoError(t, unplugNIC(ctx, e, vm), "KubeVirt: the bridge NIC out of the VM's template")
	})
}

// unplugNIC removes hotNIC from the VM's template again (the last interface and network), so the restart's VMI
// starts without it.
func unplugNIC(ctx context.Context, e *env, vm string) error {
	_, err := e.node.Kube().Run(ctx, nil, "patch", "vm", vm, "--type", "json", "-p", `[
{"op": "test", "path": "/spec/template/spec/domain/devices/interfaces/3/name", "value": "`+hotNIC+`"},
{"op": "remove", "path": "/spec/template/spec/domain/devices/interfaces/3"},
{"op": "test", "path": "/spec/template/spec/networks/3/name", "value": "`+hotNIC+`"},
{"op": "remove", "path": "/spec/template/spec/networks/3"}]`)
	return err
}

// hotNICStatus is hotNIC's entry in the VMI's status, once the CNI stand-in published it (multus-status), or nil.
func hotNICStatus(vmi *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstanceNetworkInterface {
	st := statusOf(vmi, hotNIC)
	if st == nil || !strings.Contains(st.InfoSource, "multus-status") {
		return nil
	}
	return st
}

// bridgeBindingSupported says whether this kernel can make the links KubeVirt's bridge binding needs in the pod:
// virt-handler's pod network setup gives the pod's interface name to a dummy link
// (pkg/network/setup/netpod/netpod.go bridgeBindingSpec), so a kernel without the dummy link type (no
// CONFIG_DUMMY, and no module support to load it) fails the setup with "LinkAdd: operation not supported" and
// the VMI crashes. The reason is returned when it cannot.
func bridgeBindingSupported(ctx context.Context) (bool, string) {
	out, err := exec.CommandContext(ctx, "unshare", "-n", "ip", "link", "add", "probe0", "type", "dummy").CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("KubeVirt's bridge binding needs the kernel's dummy link type, which this kernel lacks "+
			"(`ip link add type dummy` in a new netns: %v: %s; /proc/modules exists: %v): virt-handler's pod network "+
			"setup would fail with \"LinkAdd: operation not supported\" and the VMI crash", err, strings.TrimSpace(string(out)), fileExists("/proc/modules"))
	}
	return true, ""
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// imageID is the image kubelet ran the pod's container of name with (its status' imageID), or "".
func imageID(pod *corev1.Pod, name string) string {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == name {
			return c.ImageID
		}
	}
	return ""
}

// patchedSyncsClean asserts what 0005 gives a VM with our binding: no SyncFailed event of the VMI (uid), and
// no hot-plug attempt of our interface in virt-launcher's log.
func patchedSyncsClean(ctx context.Context, t *testing.T, e *env, run *guestRun, uid string) {
	t.Helper()
	n, msg, err := syncFailures(ctx, e, uid)
	require.NoError(t, err)
	assert.Zero(t, n, "SyncFailed events of the VMI on the patched virt-launcher; the newest: %s", msg)
	attempts, err := hotplugAttempts(ctx, e, run, "udn-vf", time.Time{})
	require.NoError(t, err)
	assert.Zero(t, attempts, "virt-launcher with 0005 picked our interface for NIC hot-plug")
}
