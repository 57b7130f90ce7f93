package container

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/hooks"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// Where KubeVirt mounts the sidecar's volumes (pkg/virt-controller/services/template.go
// newSidecarContainerRenderer: the hooks emptyDir at hooks.HookSocketsSharedDirectory with subPath = the
// container name, device-info at pkg/network/downwardapi MountPath) and where manifests/podinfo-policy
// mounts pod-info; the sidecar's defaults are these paths, so the container gets no flags.
const (
	mountHooks      = hooks.HookSocketsSharedDirectory
	mountDeviceInfo = "/etc/podinfo"
	mountPodInfo    = "/var/run/kubevirt-private/downwardapi/podinfo"
	bindingName     = "sriov-udn"
	// bindingNameEnv is hooks.NetworkBindingPluginNameEnvVar of KubeVirt v1.9 (pkg/hooks/hooks.go), which
	// v1.9's virt-controller sets for each binding plugin's sidecar; test/go.mod's v1.8.4 has no such constant.
	bindingNameEnv = "NETWORK_BINDING_PLUGIN_NAME"
)

// pod is one virt-launcher pod's volumes for our sidecar, on the host (harness.Pod), and the name of the
// sidecar's container.
type pod struct {
	*harness.Pod
	container string // CONTAINER_NAME, e.g. hook-sidecar-0
}

func newPod(t *testing.T, suffix string) *pod {
	t.Helper()
	p := &pod{Pod: harness.TestPod(t, suffix), container: "hook-sidecar-" + suffix}
	// kubelet creates an emptyDir world-writable (pkg/volume/emptydir/empty_dir.go, perm 0777): the sidecar,
	// uid 107, creates its socket and cache in it.
	require.NoError(t, os.Chmod(p.HooksDir, 0o777))
	return p
}

// env is what virt-controller v1.9 sets in a binding plugin's sidecar (template.go newSidecarContainerRenderer).
func (p *pod) env() []string {
	return []string{hooks.ContainerNameEnvVar + "=" + p.container, bindingNameEnv + "=" + bindingName}
}

// sidecar is one running sidecar and the way to stop it as its runner would.
type sidecar struct {
	proc *harness.Process
	name string // the container's name; empty for the bare binary
	// stop stops it (SIGTERM to the binary, `podman stop` to the container) and returns its exit code.
	stop func(t *testing.T) int
}

// startBare runs the bare binary with the same env, and flags pointing at the host paths of the volumes.
func startBare(t *testing.T, p *pod) *sidecar {
	t.Helper()
	proc := p.StartWith(t, func(c *exec.Cmd) { c.Env = append(c.Env, p.env()...) }, bareBin)
	return &sidecar{proc: proc, stop: func(t *testing.T) int {
		require.NoError(t, proc.Signal(syscall.SIGTERM))
		code, err := proc.Wait(20 * time.Second)
		require.NoError(t, err)
		return code
	}}
}

// startContainer runs the image as the kubelet runs KubeVirt's sidecar container for a non-root VMI: the
// volumes bind-mounted where KubeVirt mounts them; uid/gid 107, every capability dropped, no privilege
// escalation (rendercontainer.go securityContext, WithDropALLCapabilities); no network of its own (the
// pod's; none here); no flags; the env above. The root is read-only with no tmpfs anywhere, which KubeVirt
// does not ask for: it proves the sidecar writes nowhere but the hooks volume. extra are more `podman
// create` flags (--memory).
// prepare, when set, runs between create and start, with the container's name.
func startContainer(t *testing.T, p *pod, extra []string, prepare func(name string)) *sidecar {
	t.Helper()
	name := "sriov-udn-" + p.container + "-" + fmt.Sprint(time.Now().UnixNano())
	t.Cleanup(func() { pm.remove(t, name) })
	args := []string{"create", "--name", name,
		"--user", "107:107", "--cap-drop", "all", "--security-opt", "no-new-privileges",
		"--read-only", "--read-only-tmpfs=false", "--network", "none",
		// podman's default nofile is above these hosts' hard limit (DESIGN.md 4d).
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--volume", p.HooksDir + ":" + mountHooks,
		"--volume", p.DeviceInfoDir + ":" + mountDeviceInfo + ":ro",
		"--volume", p.PodInfoDir + ":" + mountPodInfo + ":ro",
	}
	for _, e := range p.env() {
		args = append(args, "--env", e)
	}
	args = append(append(args, extra...), image)
	_, err := pm.run(args...)
	require.NoError(t, err)
	if prepare != nil {
		prepare(name)
	}
	// `podman start --attach` forwards the container's stderr (the sidecar's JSON log) and exits with the
	// container's exit code.
	proc := harness.StartWith(t, inheritEnv, "podman", append(pm.global(), "start", "--attach", name)...)
	return &sidecar{proc: proc, name: name, stop: func(t *testing.T) int {
		_, err := pm.run("stop", "--time", "20", name)
		require.NoError(t, err, "podman stop exits 0")
		code, err := proc.Wait(20 * time.Second)
		require.NoError(t, err)
		st := pm.state(t, name)
		assert.False(t, st.Running)
		assert.Equal(t, code, st.ExitCode, "podman start --attach exits with the container's code")
		return st.ExitCode
	}}
}
