package guest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// Time limits, generous: on a loaded 2-core machine debootstrap took 7.5 min and a TCG boot 3 min
// (idle: 1.5 min and about 1 min); at a load of 30 (seven helpers on 2 cores) a Debian 13 boot took
// 5.5 to 9.5 min.
const (
	imageBuildTimeout = 15 * time.Minute
	bootTimeout       = 15 * time.Minute
	collectTimeout    = 10 * time.Second
)

// guestEnv is what every scenario shares: the built sidecar, the floor image and the results table.
type guestEnv struct {
	// image is the floor guest (Debian 12); runOn takes any image of the matrix.
	image      Image
	cacheDir   string
	sidecar    string
	secretsDir string

	mu      sync.Mutex
	timings map[string]time.Duration
	table   *matrixTable
}

func (e *guestEnv) record(name string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timings[name] = d
}

// TestGuest_CloudInitFromSidecar_ConfiguresGuestNICs runs virt-launcher's pre-start path against
// the built sidecar and boots each guest of the matrix (ImageMatrix) on the ISO KubeVirt builds; each
// subtest (image/scenario) asserts on the guest's own report. Scenarios run two at a time (go test's
// -parallel, GOMAXPROCS) across images; the starts of one scenario run one after the other on one disk.
// GUEST_MATRIX=smoke runs only the smoke scenarios on the floor image (make test-guest does that on every
// KubeVirt version but the first: the code a guest sees, the ISO generator and the hook Manager, is the
// same in each). At the end the log shows the table image x scenario with the guest's cloud-init version.
func TestGuest_CloudInitFromSidecar_ConfiguresGuestNICs(t *testing.T) {
	smoke, err := smokeOnly()
	require.NoError(t, err)
	env := setupGuest(t)
	scenarios, err := buildScenarios()
	require.NoError(t, err)
	images := ImageMatrix()
	if smoke {
		images = images[:1]
	}
	env.table = newMatrixTable(images, scenarios)
	kubevirt := os.Getenv("KUBEVIRT_VERSION") // make test-guest exports it
	if kubevirt == "" {
		kubevirt = "of test/go.mod"
	}
	t.Cleanup(func() {
		t.Logf("guest matrix (KubeVirt %s, GUEST_MATRIX=%s):\n%s", kubevirt, matrixMode(smoke), env.table)
	})
	for i, g := range images {
		t.Run(g.Name, func(t *testing.T) {
			t.Parallel()
			img := env.image
			if i > 0 {
				img = env.ensureImage(t, g.Spec)
			}
			for _, sc := range scenarios {
				if !sc.runsOn(i == 0, smoke) {
					continue
				}
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					t.Cleanup(func() { env.table.result(g.Name, sc.name, outcomeOf(t)) })
					env.runOn(t, img, g, sc)
				})
			}
		})
	}
}

// smokeOnly reads GUEST_MATRIX: "full" or unset runs the whole matrix, "smoke" the smoke boots.
func smokeOnly() (bool, error) {
	switch m := os.Getenv("GUEST_MATRIX"); m {
	case "", "full":
		return false, nil
	case "smoke":
		return true, nil
	default:
		return false, fmt.Errorf("GUEST_MATRIX=%q: want full or smoke", m)
	}
}

func matrixMode(smoke bool) string {
	if smoke {
		return "smoke"
	}
	return "full"
}

// setupGuest skips (saying why) when the machine cannot boot the guest, else returns the shared
// environment: floor image built or taken from the cache, sidecar built, KubeVirt's cloud-init dir set.
func setupGuest(t *testing.T) *guestEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping guest boot in -short mode: it takes minutes (run `make test-guest`)")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping guest boot: needs root (debootstrap, KubeVirt's hook root /var/run/kubevirt-hooks, the qemu user)")
	}
	if missing := missingCommands("qemu-system-x86_64", "xorrisofs", "useradd"); len(missing) > 0 {
		t.Skipf("skipping guest boot: %s not installed (Debian: apt-get install qemu-system-x86 xorriso)", strings.Join(missing, ", "))
	}

	cacheDir := os.Getenv("GUEST_CACHE_DIR")
	if cacheDir == "" {
		cacheDir = "/var/cache/sriov-udn-binding/guest"
	}
	env := &guestEnv{cacheDir: cacheDir, timings: map[string]time.Duration{}}
	t.Cleanup(func() { logTimings(t, env) })
	env.image = env.ensureImage(t, DefaultImageSpec())

	msg, err := ensureQemuUser()
	require.NoError(t, err)
	t.Log(msg)

	bin, err := harness.Build(t.TempDir())
	require.NoError(t, err)
	env.sidecar = bin
	env.secretsDir = t.TempDir()
	return env
}

// ensureImage returns the cached image of spec, building it first (skipping, saying why, when it is
// not cached and the machine cannot build it).
func (e *guestEnv) ensureImage(t *testing.T, spec ImageSpec) Image {
	t.Helper()
	if !imageIn(filepath.Join(e.cacheDir, spec.Key())).complete() {
		if missing := missingCommands("debootstrap", "mkfs.ext4"); len(missing) > 0 {
			t.Skipf("skipping guest boot: no cached %s image in %s and %s not installed (Debian: apt-get install debootstrap e2fsprogs)",
				spec.Suite, e.cacheDir, strings.Join(missing, ", "))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), imageBuildTimeout)
	defer cancel()
	start := time.Now()
	img, built, err := EnsureImage(ctx, e.cacheDir, spec, t.Logf)
	require.NoError(t, err, "build the %s guest image", spec.Suite)
	if built {
		e.record("image build "+spec.Suite+" "+spec.Key(), time.Since(start))
	} else {
		t.Logf("guest image: cached at %s (%s, key %s)", img.Dir, spec.Suite, spec.Key())
	}
	return img
}

func missingCommands(names ...string) []string {
	var missing []string
	for _, n := range names {
		if _, err := debroot.FindCommand(n); err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

func logTimings(t *testing.T, env *guestEnv) {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, n := range sortedKeys(env.timings) { // "boot ..." sorts before "image build"
		t.Logf("TIMING %-80s %s", n, env.timings[n].Round(100*time.Millisecond))
	}
}

// runOn is one scenario on img (named imageName in the results table): per start,
// the pre-start path (serialised under the hook-root lock), ISO, boot, checks. Starts after the first
// boot the same disk, as a restarted VM does.
func (e *guestEnv) runOn(t *testing.T, img Image, g GuestImage, sc scenario) {
	imageName := g.Name
	work := t.TempDir()
	disk := ""
	if len(sc.starts) > 1 {
		disk = filepath.Join(work, "disk.img")
		require.NoError(t, copySparse(img.Root, disk), "the VM's own disk")
	}
	guestFwd := ""
	if sc.include != "" {
		// cloud-init fetches the user's #include URL (includeHost) through the pod NIC's user network.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, sc.include)
		}))
		t.Cleanup(srv.Close)
		guestFwd = "tcp:" + includeHost + ":80-tcp:" + strings.TrimPrefix(srv.URL, "http://")
	}
	var first *Report
	for i, st := range sc.starts {
		name := fmt.Sprintf("start%d", i+1)
		if !t.Run(name, func(t *testing.T) {
			report := e.bootOn(t, img, imageName+"/"+sc.name+"/"+name, st, filepath.Join(work, name), disk, guestFwd)
			if e.table != nil {
				e.table.version(imageName, report.CloudInitVersion)
			}
			// The checks read nmcli only where the report has its section: on the NetworkManager guest it
			// must be there, or those checks would be skipped without a word.
			if g.NetworkManager {
				require.NotEmptyf(t, report.NM, "%s runs NetworkManager but its report has no nmcli devices", imageName)
			} else {
				assert.Nilf(t, report.NM, "%s has no NetworkManager but reported an nmcli section", imageName)
			}
			st.check(t, report)
			if first != nil {
				// Every start is the same instance to cloud-init (KubeVirt keeps the instance-id).
				assert.Equal(t, first.InstanceID, report.InstanceID, "cloud-init instance-id across starts")
			}
			first = report
		}) {
			t.FailNow()
		}
	}
}

// bootOn is one start on img: pre-start path, domain, ISO, qemu, report.
func (e *guestEnv) bootOn(t *testing.T, img Image, name string, st start, work, disk, guestFwd string) *Report {
	require.NoError(t, os.MkdirAll(work, 0o755))
	var (
		data    *cloudinit.CloudInitData
		domMACs map[string]string
	)
	if !t.Run("HooksThroughHookManager", func(t *testing.T) {
		data, domMACs = e.preStart(t, st, work)
	}) {
		t.FailNow()
	}

	t.Logf("network data the sidecar returned (%s):\n%s", data.DataSource, data.NetworkData)
	iso, err := launcherGenerateISO(st.vmi, data)
	require.NoError(t, err)
	nics, err := guestNICs(st.vmi, domMACs)
	require.NoError(t, err)
	t.Logf("guest NICs: %v (domain MACs of the wired NICs: %v)", nics, domMACs)

	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	boot := Boot{Image: img, Disk: disk, ISO: iso, NICs: nics, GuestFwd: guestFwd,
		ConsoleLog: filepath.Join(work, "console.log"), Accel: os.Getenv("GUEST_QEMU_ACCEL")}
	res, err := boot.Run(ctx)
	keepArtifacts(t, name, data, boot.ConsoleLog, res.Report)
	require.NoError(t, err, "boot the guest")
	e.record("boot "+name, res.Took)
	t.Logf("guest booted and reported in %s", res.Took.Round(100*time.Millisecond))

	report, err := ParseReport(res.Report)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what the guest reported:\n%s", report)
		}
	})
	return report
}

// copySparse copies the image to a VM disk, keeping holes (cp --sparse=always): 2 GiB, mostly empty.
func copySparse(src, dst string) error {
	cp, err := debroot.FindCommand("cp")
	if err != nil {
		return err
	}
	if out, err := exec.Command(cp, "--sparse=always", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}

// keepArtifacts copies what a scenario produced to $GUEST_ARTIFACTS_DIR/<scenario>/ when that is
// set (CI can upload it; locally it helps to read a console log).
func keepArtifacts(t *testing.T, name string, data *cloudinit.CloudInitData, consoleLog, report string) {
	root := os.Getenv("GUEST_ARTIFACTS_DIR")
	if root == "" {
		return
	}
	dir := filepath.Join(root, name)
	console, _ := os.ReadFile(consoleLog)
	files := map[string][]byte{
		"user-data": []byte(data.UserData), "network-data": []byte(data.NetworkData),
		"console.log": console, "report.txt": []byte(report),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keep artifacts: %v", err)
		return
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), content, 0o644); err != nil {
			t.Logf("keep artifacts: %v", err)
		}
	}
	t.Logf("artifacts in %s", dir)
}

// preStart starts the sidecar on pod-info written by kubelet's AtomicWriter, collects it with
// KubeVirt's hook Manager and runs the Manager's PreCloudInitIso, then builds the domain and runs its
// OnDefineDomain, as virt-launcher does. It holds the hook-root lock (the Manager collects every socket
// under /var/run/kubevirt-hooks) only for this part. It returns the cloud-init data and the MAC of each
// NIC the domain wires as an <interface> ("" when the final domain gives it none).
func (e *guestEnv) preStart(t *testing.T, st start, work string) (*cloudinit.CloudInitData, map[string]string) {
	data, dom, _ := e.preStartDomain(t, st, work)
	return data, domainNICMACs(dom)
}

// preStartDomain is preStart that also returns the domain XML the sidecar's OnDefineDomain returned (the
// VFIO test hands its <hostdev> to libvirt).
func (e *guestEnv) preStartDomain(t *testing.T, st start, work string) (*cloudinit.CloudInitData, *api.DomainSpec, []byte) {
	harness.LockHooksRoot(t)
	// Unique across processes and starts; short, as a unix socket path has at most 107 bytes.
	name := fmt.Sprintf("guest-%d-%s", os.Getpid(), uuidFor(string(st.vmi.UID))[:8])
	pod, err := harness.NewPod(harness.SidecarDir(t, name), work)
	require.NoError(t, err)
	pod.SocketName, pod.CacheDir = name+".sock", filepath.Join(work, "ifacecache")
	require.NoError(t, pod.WritePodInfo(st.labels, st.annotations))
	// With pod-info the device-info volume is not mounted (the CR field takes one value): never written.
	p := pod.Start(t, e.sidecar, "--binding-name", bindingName, "--wait-timeout", "20s")
	require.NoError(t, hooks.GetManager().Collect(1, collectTimeout), "collect the sidecar socket")
	data, err := launcherPreStart(st.vmi, e.secretsDir)
	require.NoErrorf(t, err, "sidecar logs:\n%s", p.Logs())
	dom, sent, returned, err := launcherDefineDomain(st.vmi, st.kubevirtPodMAC)
	require.NoErrorf(t, err, "sidecar logs:\n%s", p.Logs())
	harness.RecordDomain(t, sent, returned) // test/libvirt runs libvirt's checks on it
	// virt-launcher calls Shutdown after qemu exits; the sidecar must answer it.
	require.NoErrorf(t, hooks.GetManager().Shutdown(), "sidecar logs:\n%s", p.Logs())
	_ = p.Signal(syscall.SIGTERM)
	return data, dom, returned
}
