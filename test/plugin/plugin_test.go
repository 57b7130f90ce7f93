package plugin

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "kubevirt.io/api/core/v1"
	pluginv1alpha1 "kubevirt.io/api/plugin/v1alpha1"
	"kubevirt.io/kubevirt/pkg/hooks"
	pluginsapi "kubevirt.io/kubevirt/pkg/hooks/plugins/v1alpha1"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/plugins"
	"sigs.k8s.io/yaml"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// pluginRoot is where virt-launcher v1.9.0 requires plugin sockets (virtwrap/plugins/sidecar.go
// pluginSocketBaseDir, unexported): ApplyDomainHooks refuses any other path.
const pluginRoot = "/var/run/kubevirt-plugin"

// ourPlugin is manifests/plugin/plugin.yaml, decoded strictly into v1.9.0's Plugin type, with its socket
// moved to pluginName's directory (the test's own) and, when timeout > 0, that hook timeout.
func ourPlugin(t *testing.T, pluginName string, timeout time.Duration) pluginv1alpha1.Plugin {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "manifests", "plugin", "plugin.yaml"))
	require.NoError(t, err)
	var p pluginv1alpha1.Plugin
	require.NoError(t, yaml.UnmarshalStrict(raw, &p), "manifests/plugin/plugin.yaml against kubevirt.io/api v1.9.0")
	require.Len(t, p.Spec.DomainHooks, 1)
	require.NotNil(t, p.Spec.DomainHooks[0].Sidecar)
	wantDir := pluginRoot + "/" + p.Name + "/"
	require.True(t, strings.HasPrefix(p.Spec.DomainHooks[0].Sidecar.SocketPath, wantDir), "the manifest's socket is where KubeVirt requires it")
	p.Spec.DomainHooks[0].Sidecar.SocketPath = filepath.Join(pluginRoot, pluginName, filepath.Base(p.Spec.DomainHooks[0].Sidecar.SocketPath))
	p.Name = pluginName
	if timeout > 0 {
		p.Spec.DomainHooks[0].Timeout = &k8smeta.Duration{Duration: timeout}
	}
	return p
}

// layout is one sidecar serving both protocols, as in a virt-launcher pod with the Plugin overlay.
type layout struct {
	proc       *harness.Process
	podInfo    *harness.Volume
	plugin     pluginv1alpha1.Plugin
	pluginSock string
	hookDir    string
}

// startSidecar starts the built binary with its plugin socket in /var/run/kubevirt-plugin/<name>/ and its
// hook socket in HooksRoot/hook-sidecar-<name> when withManager (the caller holds the hooks root lock), else
// in a directory KubeVirt's Manager never scans (such tests may run beside others). The pod-info volume
// starts empty; no device-info file exists.
func startSidecar(t *testing.T, name string, withManager bool, timeout time.Duration) *layout {
	t.Helper()
	harness.RequireRoot(t)
	hookDir := t.TempDir()
	if withManager {
		hookDir = harness.SidecarDir(t, name)
	}
	pluginDir := filepath.Join(pluginRoot, name)
	require.NoError(t, os.RemoveAll(pluginDir))
	require.NoError(t, os.MkdirAll(pluginDir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(pluginDir) })
	data := t.TempDir()
	podInfo, err := harness.NewVolume(filepath.Join(data, "podinfo"))
	require.NoError(t, err)
	l := &layout{podInfo: podInfo, plugin: ourPlugin(t, name, timeout), hookDir: hookDir}
	l.pluginSock = l.plugin.Spec.DomainHooks[0].Sidecar.SocketPath
	l.proc = harness.Start(t, sidecarBin,
		"--socket-dir", hookDir,
		"--plugin-socket", l.pluginSock,
		"--device-info-file", filepath.Join(data, "device-info", "network-info"),
		"--pod-info-dir", filepath.Join(data, "podinfo"),
		"--iface-cache-dir", filepath.Join(hookDir, "ifacecache"),
		"--log-level", "debug")
	require.FileExists(t, l.pluginSock)
	return l
}

func (l *layout) writeSample(t *testing.T, pod harness.SamplePod) {
	t.Helper()
	require.NoError(t, l.podInfo.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
}

// domainSpec is a domain as KubeVirt's converter leaves it for the sample VMI before the hooks: the pod
// NIC, no hostdev.
func domainSpec() *api.DomainSpec {
	return &api.DomainSpec{
		Type: "kvm",
		Name: "tenant-a_vm-sriov",
		Devices: api.Devices{
			Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: "02:00:00:00:00:0a"}}},
		},
	}
}

// hostdevAliases lists the hostdev aliases of spec, one entry per hostdev.
func hostdevAliases(spec *api.DomainSpec) []string {
	var out []string
	for _, h := range spec.Devices.HostDevices {
		if h.Alias != nil {
			out = append(out, h.Alias.GetName())
		} else {
			out = append(out, "")
		}
	}
	return out
}

// legacy runs the hook protocol as virt-launcher does before the plugins (virtwrap/util/libvirt_helper.go
// ApplySidecarHooks): the Manager's OnDefineDomain, its XML unmarshalled back into the spec.
func legacy(t *testing.T, spec *api.DomainSpec, vmi *v1.VirtualMachineInstance) (string, *api.DomainSpec) {
	t.Helper()
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	out, err := mgr.OnDefineDomain(spec, vmi)
	require.NoError(t, err)
	var got api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(out), &got))
	return out, &got
}

func TestMutateDomain_Boot_EqualsOnDefineDomainOnTheSameInputs(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startSidecar(t, "plugin-equal", true, 0)
	l.writeSample(t, pod)

	spec := domainSpec()
	onDefine, _ := legacy(t, spec, vmi)
	require.Contains(t, onDefine, "ua-sriov-sriov-l2", "the legacy hook wired the VF")

	// The same bytes the Manager sent (manager.go OnDefineDomain: xml.MarshalIndent, json.Marshal), through
	// KubeVirt's own DomainHookService client.
	domainXML, err := xml.MarshalIndent(spec, "", "\t")
	require.NoError(t, err)
	vmiJSON, err := json.Marshal(vmi)
	require.NoError(t, err)
	conn, err := pluginsapi.DialSocket(l.pluginSock)
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pluginsapi.DefaultTimeout)
	defer cancel()
	res, err := pluginsapi.NewDomainHookServiceClient(conn).MutateDomain(ctx, &pluginsapi.MutateDomainRequest{
		DomainType:     "libvirt",
		Domain:         domainXML,
		Vmi:            vmiJSON,
		SidecarContext: &pluginsapi.SidecarContext{InvocationContext: string(pluginv1alpha1.InvocationContextBoot)},
	})
	require.NoError(t, err)
	assert.Equal(t, onDefine, string(res.Domain))

	// virt-launcher's Shutdown (hook protocol) stops the whole sidecar: both sockets go.
	require.NoError(t, hooks.GetManager().Shutdown())
	code, err := l.proc.Wait(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, l.pluginSock)
}

func TestApplyDomainHooks_LegacyThenPlugin_OneHostdevPerVF(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startSidecar(t, "plugin-both", true, 0)
	l.writeSample(t, pod)
	want := []string{"sriov-sriov-l2", "sriov-sriov-localnet"}

	// Plugin path alone.
	pluginOnly, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{l.plugin}, vmi, domainSpec(), pluginv1alpha1.InvocationContextBoot)
	require.NoError(t, err)
	assert.ElementsMatch(t, want, hostdevAliases(pluginOnly))

	// Both, in virt-launcher's order (SetDomainSpecStrWithHooks), twice: virt-launcher defines the domain
	// several times per start, each time from the spec the previous round left.
	spec := domainSpec()
	for round := range 2 {
		_, spec = legacy(t, spec, vmi)
		require.ElementsMatch(t, want, hostdevAliases(spec), "round %d: after the legacy hook", round)
		var xmlStr string
		spec, xmlStr, err = plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{l.plugin}, vmi, spec, pluginv1alpha1.InvocationContextBoot)
		require.NoError(t, err)
		assert.ElementsMatch(t, want, hostdevAliases(spec), "round %d: one hostdev per VF after both", round)
		assert.Equal(t, 2, strings.Count(xmlStr, "<hostdev "), "round %d: the XML virt-launcher defines", round)
	}
	assert.Equal(t, pluginOnly.Devices.HostDevices, spec.Devices.HostDevices, "both paths wire the same hostdevs")
}

func TestApplyDomainHooks_OtherContexts_EchoAtOnce(t *testing.T) {
	// No data at all: a Boot call would wait. The other contexts must not.
	_, vmi := harness.LoadSamples(t)
	l := startSidecar(t, "plugin-echo", false, 0)
	// What ApplyDomainHooks returns when no hook changes anything: its own libvirtxml round trip.
	unchanged, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{{ObjectMeta: k8smeta.ObjectMeta{Name: "none"}}}, vmi, domainSpec(), pluginv1alpha1.InvocationContextBoot)
	require.NoError(t, err)
	for _, invocation := range []pluginv1alpha1.InvocationContext{pluginv1alpha1.InvocationContextMigrationTarget, pluginv1alpha1.InvocationContextMigrationSource} {
		t.Run(string(invocation), func(t *testing.T) {
			start := time.Now()
			got, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{l.plugin}, vmi, domainSpec(), invocation)
			require.NoError(t, err)
			assert.Less(t, time.Since(start), time.Second, "answered without waiting for data")
			assert.Equal(t, unchanged, got)
			_, err = l.proc.WaitLog(func(m map[string]any) bool {
				return m["msg"] == "domain passed through" && m["invocationContext"] == string(invocation)
			}, 5*time.Second)
			assert.NoError(t, err, "the sidecar was called and passed the domain through")
		})
	}

	// SIGTERM stops both servers and removes both sockets.
	require.NoError(t, l.proc.Signal(syscall.SIGTERM))
	code, err := l.proc.Wait(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, l.pluginSock)
	assert.False(t, harness.HasSocket(l.hookDir), "hook socket removed")
}

func TestApplyDomainHooks_MissingDataFile_FailsNamingItWithinThePluginTimeout(t *testing.T) {
	_, vmi := harness.LoadSamples(t)
	cases := []struct {
		name, plugin string
		timeout      time.Duration // the Plugin's hook timeout; 0: KubeVirt's default
		bound        time.Duration // virt-launcher's own limit for the call
	}{
		{"hook timeout 3s", "plugin-miss-3s", 3 * time.Second, 3 * time.Second},
		{"KubeVirt's default 30s", "plugin-miss-default", 0, pluginsapi.DefaultTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := startSidecar(t, tc.plugin, false, tc.timeout)
			start := time.Now()
			_, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{l.plugin}, vmi, domainSpec(), pluginv1alpha1.InvocationContextBoot)
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Less(t, elapsed, tc.bound, "our answer came before virt-launcher's timeout")
			// Our error, not virt-launcher's "context deadline exceeded" with nothing named.
			assert.Contains(t, err.Error(), "DownwardAPI data still missing")
			assert.Contains(t, err.Error(), "interface sriov-l2 (network sriov-l2)")
			t.Logf("failed after %s: %v", elapsed.Round(time.Millisecond), err)
		})
	}
}

func TestPluginCondition_SelectsOnlyVMIsUsingTheBinding(t *testing.T) {
	pod, vmi := harness.LoadSamples(t)
	l := startSidecar(t, "plugin-cond", false, 0)
	l.writeSample(t, pod)
	others := map[string]func(*v1.Interface){
		"core sriov":     func(i *v1.Interface) { i.Binding = nil; i.SRIOV = &v1.InterfaceSRIOV{} },
		"passt binding":  func(i *v1.Interface) { i.Binding = &v1.PluginBinding{Name: "passt"} },
		"no binding set": func(i *v1.Interface) { i.Binding = nil; i.Bridge = &v1.InterfaceBridge{} },
	}
	for name, edit := range others {
		t.Run(name, func(t *testing.T) {
			other := vmi.DeepCopy()
			for i := range other.Spec.Domain.Devices.Interfaces {
				if other.Spec.Domain.Devices.Interfaces[i].Binding != nil {
					edit(&other.Spec.Domain.Devices.Interfaces[i])
				}
			}
			got, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{l.plugin}, other, domainSpec(), pluginv1alpha1.InvocationContextBoot)
			require.NoError(t, err)
			assert.Empty(t, got.Devices.HostDevices)
		})
	}
	assert.NotContains(t, l.proc.Logs(), `"hook":"MutateDomain"`, "the plugin was never called for a VMI without the binding")

	got, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{l.plugin}, vmi, domainSpec(), pluginv1alpha1.InvocationContextBoot)
	require.NoError(t, err)
	assert.Len(t, got.Devices.HostDevices, 2)
	_, err = l.proc.WaitLog(func(m map[string]any) bool { return m["hook"] == "MutateDomain" && m["outcome"] == "ok" }, 5*time.Second)
	assert.NoError(t, err)
}
