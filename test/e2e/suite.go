package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kube"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// Target is a cluster the suite runs on: KubeVirt deployed and the sriov-udn binding registered as
// docs/install.md tells an operator (the binding's sidecar image keeps "sriov-udn-binding" in its name), and
// fixtures that fit its networks.
type Target struct {
	// Kubeconfig is an admin's kubeconfig whose server this host reaches.
	Kubeconfig string
	// Kubectl is the kubectl binary; empty: kubectl on PATH.
	Kubectl string
	// Fixtures is a kustomize directory with the namespace Namespace, the NetworkAttachmentDefinitions and the
	// VirtualMachine VM. VM has a pod NIC and an interface bound to sriov-udn, on a network whose pod gets
	// k8s.ovn.org/pod-networks (from OVN-K, a stand-in, or the VM template), and a cloudInitNoCloud volume
	// with user data.
	Fixtures  string
	Namespace string
	VM        string
	// Checks are the target's own subtests, run on the VM's launcher pod after the suite's.
	Checks []Check
}

// Check is a target's own subtest on the launcher pod.
type Check struct {
	Name string
	Run  func(t *testing.T, k kube.Kubectl, pod *corev1.Pod)
}

// Binding is the binding's name in the KubeVirt CR (manifests/kubevirt).
const Binding = "sriov-udn"

const (
	// podInfoDir is where the MutatingAdmissionPolicy mounts the pod-info volume into our sidecar
	// (manifests/podinfo-policy, DESIGN.md section 2).
	podInfoDir = "/var/run/kubevirt-private/downwardapi/podinfo"
	// imageMark is in our sidecar image's name whatever its registry: the MutatingAdmissionPolicy finds our
	// container by it.
	imageMark = "sriov-udn-binding"
)

// cloudInitISO is KubeVirt's cloud-init disk inside the compute container: <dir>/<namespace>/<vmi>/noCloud.iso
// (pkg/cloud-init/cloud-init.go GetIsoFilePath), dir set by cmd/virt-launcher/virt-launcher.go to
// <--ephemeral-disk-dir>/cloud-init-data.
func cloudInitISO(namespace, vmi string) string {
	return "/var/run/kubevirt-ephemeral-disks/cloud-init-data/" + namespace + "/" + vmi + "/noCloud.iso"
}

// must runs kubectl and fails t on error.
func must(t *testing.T, ctx context.Context, k kube.Kubectl, args ...string) []byte {
	t.Helper()
	out, err := k.Run(ctx, nil, args...)
	require.NoError(t, err)
	return out
}

// Run runs the suite on the target: what an operator's cluster with the binding registered must do for a VM
// that uses it. Each failure names its layer: cluster, KubeVirt, admission, sidecar, status.
func Run(t *testing.T, target Target) {
	k := kube.Kubectl{Binary: target.Kubectl, Kubeconfig: target.Kubeconfig}
	// Within the test binary's own deadline (go test -timeout), so that the cleanups still run on a timeout.
	deadline := time.Now().Add(30 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-5*time.Minute).Before(deadline) {
		deadline = d.Add(-5 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ns, name := target.Namespace, target.VM

	t.Run("KubeVirt registers the binding with our image", func(t *testing.T) {
		var kv kubevirtv1.KubeVirt
		require.NoError(t, k.GetJSON(ctx, &kv, "-n", "kubevirt", "kubevirt", "kubevirt"), "KubeVirt: the CR")
		require.NotNil(t, kv.Spec.Configuration.NetworkConfiguration, "KubeVirt: spec.configuration.network")
		plugin, ok := kv.Spec.Configuration.NetworkConfiguration.Binding[Binding]
		require.True(t, ok, "KubeVirt: no binding %q in spec.configuration.network.binding", Binding)
		assert.Contains(t, plugin.SidecarImage, imageMark, "KubeVirt: the binding's sidecarImage")
		assert.Equal(t, kubevirtv1.KubeVirtPhaseDeployed, kv.Status.Phase, "KubeVirt: the CR's phase")
	})

	fixtures, err := k.Run(ctx, nil, "kustomize", target.Fixtures)
	require.NoError(t, err, "cluster: the fixtures")
	namespaces, bad, err := fixtureDocs(fixtures, name)
	require.NoError(t, err, "cluster: the fixtures")
	// Registered before anything is made, so that a failure at any step still dumps and deletes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if t.Failed() {
			dump(t, ctx, k, ns)
		}
		if _, err := k.Run(ctx, nil, "delete", "-k", target.Fixtures, "--ignore-not-found", "--wait=true", "--timeout=4m"); err != nil {
			t.Logf("cluster: delete the fixtures: %v", err)
		}
	})

	for _, doc := range namespaces {
		_, err := k.Run(ctx, doc, "apply", "-f", "-")
		require.NoError(t, err, "cluster: the fixtures' namespace")
	}

	t.Run("the admission policy refuses the VM without a cloud-init volume", func(t *testing.T) {
		// A policy takes effect once the apiserver's informer has it: retry the dry run until denied.
		err := eventually(ctx, 2*time.Minute, 2*time.Second, func() error {
			out, err := k.Run(ctx, bad, "apply", "--dry-run=server", "-f", "-")
			if err == nil {
				return fmt.Errorf("the dry run admitted the VM: %s", out)
			}
			if !strings.Contains(err.Error(), "cloudInitNoCloud or cloudInitConfigDrive") {
				return fmt.Errorf("denied for another reason: %w", err)
			}
			return nil
		})
		assert.NoError(t, err, "admission: manifests/policy validating-policy.yaml")
	})

	// A policy or a namespace's default ServiceAccount may not be in effect at once: retry the apply.
	require.NoError(t, eventually(ctx, 2*time.Minute, 2*time.Second, func() error {
		_, err := k.Run(ctx, nil, "apply", "-k", target.Fixtures)
		return err
	}), "KubeVirt: the fixtures admitted")
	var vmi kubevirtv1.VirtualMachineInstance
	require.NoError(t, eventually(ctx, 15*time.Minute, 2*time.Second, func() error {
		if err := k.GetJSON(ctx, &vmi, "-n", ns, "vmi", name); err != nil {
			return err
		}
		if vmi.Status.Phase == kubevirtv1.Failed {
			return nil // ends the wait at once: checked below, and the cleanup dumps the events
		}
		for _, c := range vmi.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %q, not Ready", vmi.Status.Phase)
	}), "KubeVirt: VMI %s/%s Ready", ns, name)
	require.NotEqual(t, kubevirtv1.Failed, vmi.Status.Phase, "KubeVirt: VMI %s/%s failed (the events are in the dump below)", ns, name)

	bound, network, err := boundInterface(&vmi)
	require.NoError(t, err, "cluster: the fixture's VM")
	var pods corev1.PodList
	require.NoError(t, k.GetJSON(ctx, &pods, "-n", ns, "pods", "-l", "kubevirt.io/created-by="+string(vmi.UID)), "KubeVirt: the launcher pod")
	require.Len(t, pods.Items, 1, "KubeVirt: one launcher pod for VMI %s", vmi.UID)
	pod := &pods.Items[0]
	sidecar := ourSidecar(pod)
	require.NotNil(t, sidecar, "KubeVirt: no container of the launcher pod %s runs an image named %s", pod.Name, imageMark)

	t.Run("the pod-info volume is mounted into our sidecar", func(t *testing.T) {
		var at []string
		for _, m := range sidecar.VolumeMounts {
			at = append(at, m.MountPath)
		}
		assert.Contains(t, at, podInfoDir, "admission: manifests/podinfo-policy mounts pod-info into %s", sidecar.Name)
	})

	t.Run("virt-launcher called our hooks and they succeeded", func(t *testing.T) {
		logs := must(t, ctx, k, "-n", ns, "logs", pod.Name, "-c", sidecar.Name)
		calls, err := hookCalls(logs)
		require.NoError(t, err, "sidecar: its log")
		for _, hook := range []string{"PreCloudInitIso", "OnDefineDomain"} {
			outcomes, ok := calls[hook]
			if assert.True(t, ok, "sidecar: no %q hook call logged; log:\n%s", hook, logs) {
				for _, o := range outcomes {
					assert.Equal(t, "ok", o, "sidecar: hook %s outcome (pkg/hooks logInterceptor)", hook)
				}
			}
		}
	})

	t.Run("the cloud-init disk carries the pod's addresses and keeps the user's data", func(t *testing.T) {
		want, err := podNetworksAddresses(pod, network)
		require.NoError(t, err, "cluster: the pod's annotations")
		require.NotEmpty(t, want, "cluster: pod-networks gives %s no address", network)
		image := must(t, ctx, k, "-n", ns, "exec", pod.Name, "-c", "compute", "--", "cat", cloudInitISO(ns, name))
		networkConfig, err := isoRootFile(image, "network-config")
		require.NoError(t, err, "KubeVirt: the cloud-init ISO")
		got, err := AddressesForMAC(networkConfig, bound.MacAddress)
		require.NoError(t, err, "sidecar: network-config:\n%s", networkConfig)
		assert.ElementsMatch(t, want, got, "sidecar: the addresses of %s (MAC %s) against pod-networks' %s\n%s",
			bound.Name, bound.MacAddress, network, networkConfig)
		userData, err := isoRootFile(image, "user-data")
		require.NoError(t, err, "KubeVirt: the cloud-init ISO")
		users, err := userDataOf(&vmi)
		require.NoError(t, err, "cluster: the fixture's VM")
		parts, err := UserDataParts(userData)
		require.NoError(t, err, "sidecar: user-data:\n%s", userData)
		assert.Contains(t, parts, strings.TrimRight(users, "\n"), "sidecar: the user's user-data kept whole, as it is or as a part\n%s", userData)
		metaData, err := isoRootFile(image, "meta-data")
		require.NoError(t, err, "KubeVirt: the cloud-init ISO")
		assert.Contains(t, string(metaData), "instance-id", "KubeVirt: meta-data")
	})

	t.Run("vmi.status.interfaces reports the bound interface", func(t *testing.T) {
		err := eventually(ctx, 3*time.Minute, 2*time.Second, func() error {
			var now kubevirtv1.VirtualMachineInstance
			if err := k.GetJSON(ctx, &now, "-n", ns, "vmi", name); err != nil {
				return err
			}
			for _, st := range now.Status.Interfaces {
				if st.Name != bound.Name {
					continue
				}
				if !strings.EqualFold(st.MAC, bound.MacAddress) {
					return fmt.Errorf("interface %s has MAC %q, want %q", bound.Name, st.MAC, bound.MacAddress)
				}
				return nil
			}
			return fmt.Errorf("no interface %q in status.interfaces: %+v", bound.Name, now.Status.Interfaces)
		})
		assert.NoError(t, err, "status")
	})

	for _, c := range target.Checks {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, k, pod) })
	}
}

// boundInterface returns the VMI's interface bound to our binding, with a MAC, and its network's
// namespace/name as pod-networks keys it.
func boundInterface(vmi *kubevirtv1.VirtualMachineInstance) (kubevirtv1.Interface, string, error) {
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Binding == nil || iface.Binding.Name != Binding {
			continue
		}
		if iface.MacAddress == "" {
			return iface, "", fmt.Errorf("VMI %s: interface %s has no macAddress", vmi.Name, iface.Name)
		}
		for _, n := range vmi.Spec.Networks {
			if n.Name != iface.Name || n.Multus == nil {
				continue
			}
			nad := n.Multus.NetworkName
			if !strings.Contains(nad, "/") {
				nad = vmi.Namespace + "/" + nad
			}
			return iface, nad, nil
		}
		return iface, "", fmt.Errorf("VMI %s: interface %s has no multus network", vmi.Name, iface.Name)
	}
	return kubevirtv1.Interface{}, "", fmt.Errorf("VMI %s: no interface bound to %s", vmi.Name, Binding)
}

// userDataOf is the user data of the VMI's cloudInitNoCloud volume, inline (the fixtures' contract).
func userDataOf(vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	for _, v := range vmi.Spec.Volumes {
		if v.CloudInitNoCloud != nil {
			if v.CloudInitNoCloud.UserData == "" {
				return "", fmt.Errorf("VMI %s: volume %s has no inline userData", vmi.Name, v.Name)
			}
			return v.CloudInitNoCloud.UserData, nil
		}
	}
	return "", fmt.Errorf("VMI %s: no cloudInitNoCloud volume", vmi.Name)
}

// UserDataParts returns the parts of a user-data file, each without its trailing newlines: the parts of a MIME
// multipart/mixed one (the form the sidecar merges the user's data into when it adds a part of its own), base64
// parts decoded, or the whole file. A part that is itself a multipart comes without its headers.
func UserDataParts(userData []byte) ([]string, error) {
	body := bufio.NewReader(bytes.NewReader(userData))
	head, err := textproto.NewReader(body).ReadMIMEHeader()
	media, params, merr := mime.ParseMediaType(head.Get("Content-Type"))
	if err != nil || merr != nil || media != "multipart/mixed" {
		return []string{strings.TrimRight(string(userData), "\n")}, nil
	}
	r := multipart.NewReader(body, params["boundary"])
	var parts []string
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("user-data: multipart part %d: %w", len(parts)+1, err)
		}
		var body io.Reader = p // quoted-printable is decoded by the reader itself
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
			body = base64.NewDecoder(base64.StdEncoding, p)
		}
		b, err := io.ReadAll(io.LimitReader(body, 16<<20))
		if err != nil {
			return nil, fmt.Errorf("user-data: multipart part %d: %w", len(parts)+1, err)
		}
		parts = append(parts, strings.TrimRight(string(b), "\n"))
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("user-data: a multipart/mixed with no part")
	}
	return parts, nil
}

// ourSidecar is the pod's container running our image.
func ourSidecar(pod *corev1.Pod) *corev1.Container {
	for i, c := range pod.Spec.Containers {
		if strings.Contains(c.Image, imageMark) {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// podNetworksAddresses reads network's ip_addresses (CIDR, OVN-K's form) from the pod's k8s.ovn.org/pod-networks,
// with plain JSON: the expectation must not come from the sidecar's own parsers.
func podNetworksAddresses(pod *corev1.Pod, network string) ([]string, error) {
	value, ok := pod.Annotations[ovn.PodNetworksAnnotation]
	if !ok {
		return nil, fmt.Errorf("pod %s has no %s", pod.Name, ovn.PodNetworksAnnotation)
	}
	pns, err := ovn.Decode(value)
	if err != nil {
		return nil, fmt.Errorf("%s of pod %s: %w", ovn.PodNetworksAnnotation, pod.Name, err)
	}
	entry, ok := pns[network]
	if !ok {
		return nil, fmt.Errorf("%s of pod %s has no %s", ovn.PodNetworksAnnotation, pod.Name, network)
	}
	prefixes, err := entry.Prefixes()
	if err != nil {
		return nil, fmt.Errorf("%s of pod %s: %s: %w", ovn.PodNetworksAnnotation, pod.Name, network, err)
	}
	var out []string
	for _, p := range prefixes {
		out = append(out, p.String())
	}
	return out, nil
}

// AddressesForMAC returns the static addresses (CIDR) that a NoCloud network-config, version 1 or 2, with or
// without the top-level "network:" key, gives the NIC of mac.
func AddressesForMAC(networkConfig []byte, mac string) ([]string, error) {
	var doc struct {
		Network *netConfig `json:"network"`
		netConfig
	}
	if err := yaml.Unmarshal(networkConfig, &doc); err != nil {
		return nil, fmt.Errorf("network-config: %w", err)
	}
	nc := doc.netConfig
	if doc.Network != nil {
		nc = *doc.Network
	}
	var out []string
	found := false
	switch nc.Version {
	case 1:
		for _, c := range nc.Config {
			if c.Type != "physical" || !strings.EqualFold(c.MAC, mac) {
				continue
			}
			found = true
			for _, s := range c.Subnets {
				if s.Type == "static" || s.Type == "static6" {
					out = append(out, s.Address)
				}
			}
		}
	case 2:
		for _, e := range nc.Ethernets {
			if strings.EqualFold(e.Match.MAC, mac) {
				found = true
				out = append(out, e.Addresses...)
			}
		}
	default:
		return nil, fmt.Errorf("network-config: version %d, want 1 or 2", nc.Version)
	}
	if !found {
		return nil, fmt.Errorf("network-config (version %d) has no NIC of MAC %s", nc.Version, mac)
	}
	return out, nil
}

// netConfig is the part of cloud-init's network config, v1 and v2, that AddressesForMAC reads.
type netConfig struct {
	Version int `json:"version"`
	Config  []struct {
		Type    string `json:"type"`
		MAC     string `json:"mac_address"`
		Subnets []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"subnets"`
	} `json:"config"`
	Ethernets map[string]struct {
		Match struct {
			MAC string `json:"macaddress"`
		} `json:"match"`
		Addresses []string `json:"addresses"`
	} `json:"ethernets"`
}

// fixtureDocs splits kustomize's output into its objects: the Namespace objects, and the VirtualMachine name
// without its cloudInitNoCloud volume (as JSON, which kubectl accepts), kept as the user wrote it otherwise.
func fixtureDocs(fixtures []byte, name string) (namespaces [][]byte, withoutCloudInit []byte, err error) {
	for _, doc := range bytes.Split(fixtures, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, nil, fmt.Errorf("fixtures: %w", err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		switch {
		case obj["kind"] == "Namespace":
			namespaces = append(namespaces, doc)
		case obj["kind"] == "VirtualMachine" && meta["name"] == name:
			if withoutCloudInit, err = dropCloudInit(obj); err != nil {
				return nil, nil, fmt.Errorf("fixtures: VM %s: %w", name, err)
			}
		}
	}
	if withoutCloudInit == nil {
		return nil, nil, fmt.Errorf("fixtures: no VirtualMachine %s", name)
	}
	return namespaces, withoutCloudInit, nil
}

// dropCloudInit removes the cloudInitNoCloud volume of a VirtualMachine object and returns it as JSON.
func dropCloudInit(vm map[string]any) ([]byte, error) {
	spec, _ := vm["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	tspec, _ := template["spec"].(map[string]any)
	volumes, _ := tspec["volumes"].([]any)
	var kept []any
	for _, v := range volumes {
		if m, _ := v.(map[string]any); m != nil && m["cloudInitNoCloud"] != nil {
			continue
		}
		kept = append(kept, v)
	}
	if len(kept) == len(volumes) {
		return nil, fmt.Errorf("no cloudInitNoCloud volume in spec.template.spec.volumes")
	}
	tspec["volumes"] = kept
	return json.Marshal(vm)
}

// hookCalls collects, per hook, the outcome of each `"msg":"hook call"` JSON log line.
func hookCalls(logs []byte) (map[string][]string, error) {
	calls := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Hook    string `json:"hook"`
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "hook call" {
			continue
		}
		calls[line.Hook] = append(calls[line.Hook], line.Outcome)
	}
	return calls, sc.Err()
}

// eventually retries check until it succeeds or the deadline passes; for cluster state that kubectl wait
// cannot express. Returns the last error.
func eventually(ctx context.Context, timeout, interval time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still failing after %s: %w", timeout, err)
		case <-ticker.C:
		}
	}
}

// dump logs what a failure needs read: the namespace's pods, VM and VMI, events, and the launcher's logs.
func dump(t *testing.T, ctx context.Context, k kube.Kubectl, ns string) {
	for _, args := range [][]string{
		{"-n", ns, "get", "pods", "-o", "wide"},
		{"-n", ns, "get", "vm,vmi", "-o", "yaml"},
		{"-n", ns, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", ns, "logs", "-l", "kubevirt.io=virt-launcher", "--all-containers", "--tail=100"},
	} {
		out, err := k.Run(ctx, nil, args...)
		t.Logf("kubectl %s (err=%v):\n%s", strings.Join(args, " "), err, out)
	}
}
