package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// podUID is the uid the pod runs as for non-root VMIs (DESIGN.md section 1).
const podUID = 107

// newLayout builds one sidecar's pod (harness.Pod) under a short /tmp path (a unix socket path has 107
// bytes): its hooks mount at <base>/hooks, with the interface cache below it as in the default layout, and its
// DownwardAPI volumes beside it, written by kubelet's AtomicWriter.
func newLayout(t *testing.T) *harness.Pod {
	t.Helper()
	base, err := os.MkdirTemp("", "flt-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	p, err := harness.NewPod(filepath.Join(base, "hooks"), base)
	require.NoError(t, err)
	return p
}

// args are the sidecar's flags for the pod, with debug logs.
func args(p *harness.Pod, extra ...string) []string {
	return p.Args(append([]string{"--log-level", "debug"}, extra...)...)
}

// kubeletPodInfo makes the pod-info dir a kubelet volume and projects the sample annotations.
func kubeletPodInfo(t *testing.T, p *harness.Pod, annotations map[string]string) {
	t.Helper()
	require.NoError(t, p.WritePodInfo(map[string]string{"kubevirt.io": "virt-launcher"}, annotations))
}

func start(t *testing.T, p *harness.Pod, extra ...string) *harness.Process {
	t.Helper()
	return harness.Start(t, sidecarBin, args(p, extra...)...)
}

// asPodUser runs the sidecar as uid/gid 107 with no capabilities, as in a virt-launcher pod.
func asPodUser(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: podUID, Gid: podUID}}
}

// chownTree gives the pod user the directories the sidecar writes (its hooks mount).
func chownTree(t *testing.T, root string) {
	t.Helper()
	require.NoError(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, podUID, podUID)
	}))
}

// samples are the sidecar's built-in samples: a dual-stack layer2 UDN VF and a DHCP localnet VF.
type samples struct {
	annotations map[string]string
	vmiJSON     []byte
	vmiUID      string
}

func loadSamples(t *testing.T) samples {
	t.Helper()
	pod, vmi := harness.LoadSamples(t)
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "cmd", "sidecar", "samples", "vmi.json"))
	require.NoError(t, err)
	return samples{annotations: pod.Metadata.Annotations, vmiJSON: raw, vmiUID: string(vmi.UID)}
}

func noCloudJSON(t *testing.T) []byte {
	t.Helper()
	raw, err := json.Marshal(&cloudinit.CloudInitData{
		DataSource:      cloudinit.DataSourceNoCloud,
		NoCloudMetaData: &cloudinit.NoCloudMetadata{InstanceID: "vm-sriov.tenant-a", LocalHostname: "vm-sriov"},
		UserData:        "#cloud-config\n",
		VolumeName:      "cloudinitdisk",
	})
	require.NoError(t, err)
	return raw
}

// dial connects a gRPC client to the sidecar's socket. virt-launcher's hook Manager dials for every call and
// closes the connection after it (manager.go), and the sidecar serves a few connections at a time: a call's
// connection is closed by its caller (closeAfter), a test's long-lived one at the test's end.
func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// closeAfter closes conn, as the Manager does after each call.
func closeAfter(conn *grpc.ClientConn) { _ = conn.Close() }

func callInfo(socket string, timeout time.Duration) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = info.NewInfoClient(conn).Info(ctx, &info.InfoParams{})
	return err
}

func preCloudInitIso(t *testing.T, socket string, vmiJSON, cloudInitData []byte, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn := dial(t, socket)
	defer closeAfter(conn)
	_, err := hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{
		Vmi: vmiJSON, CloudInitData: cloudInitData,
	})
	return err
}

// msgIs matches a JSON log line by its message.
func msgIs(msgs ...string) func(map[string]any) bool {
	return func(l map[string]any) bool {
		for _, m := range msgs {
			if l["msg"] == m {
				return true
			}
		}
		return false
	}
}

// procStatusKiB reads one "<Field>: N kB" line of /proc/<pid>/status.
func procStatusKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuTicks is utime+stime of pid in clock ticks (/proc/<pid>/stat fields 14 and 15).
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, err := strconv.Atoi(fields[11])
	require.NoError(t, err)
	stime, err := strconv.Atoi(fields[12])
	require.NoError(t, err)
	return utime + stime
}

// runToExit runs the binary with args and returns its exit code and combined output; a process still
// running after timeout is killed and reported as code -1.
func runToExit(t *testing.T, timeout time.Duration, adjust func(*exec.Cmd), args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(sidecarBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if adjust != nil {
		adjust(cmd)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), out.String()
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return -1, out.String()
	}
}
