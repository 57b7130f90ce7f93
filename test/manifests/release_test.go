package manifests_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// What TestRelease runs, exactly as docs/image.md tells a maintainer (with a podman of its own).
const (
	releaseVersion = "v0.1.0"
	releaseRepo    = "example.org/x"
	releaseImage   = releaseRepo + "/sriov-udn-binding:" + releaseVersion
)

// releaseArches are the architectures `make release` builds (the Makefile's RELEASE_ARCHES).
var releaseArches = []string{"amd64", "arm64"}

// releaseFiles are the manifests `make release` writes: one per entry point and Kubernetes version, with the
// MutatingAdmissionPolicy version each must carry ("" for none), and one per registration (releaseRegistrations).
var releaseFiles = map[string]string{
	"sriov-udn-binding-" + releaseVersion + ".yaml":                                mapV1,
	"sriov-udn-binding-kubernetes-1.34-1.35-" + releaseVersion + ".yaml":           mapV1beta1,
	"sriov-udn-binding-pod-info-" + releaseVersion + ".yaml":                       "",
	"sriov-udn-binding-plugin-" + releaseVersion + ".yaml":                         mapV1,
	"sriov-udn-binding-plugin-kubernetes-1.34-1.35-" + releaseVersion + ".yaml":    mapV1beta1,
	"sriov-udn-binding-hco-" + releaseVersion + ".yaml":                            mapV1,
	"sriov-udn-binding-hco-kubernetes-1.34-1.35-" + releaseVersion + ".yaml":       mapV1beta1,
	"sriov-udn-binding-webhook-" + releaseVersion + ".yaml":                        "",
	"sriov-udn-binding-hco-webhook-" + releaseVersion + ".yaml":                    "",
	"sriov-udn-binding-registration-kubevirt-" + releaseVersion + ".yaml":          "",
	"sriov-udn-binding-registration-kubevirt-pod-info-" + releaseVersion + ".yaml": "",
	"sriov-udn-binding-registration-hco-" + releaseVersion + ".yaml":               "",
}

// releaseRegistrations are the release files that register the binding: the only ones that name an image.
var releaseRegistrations = map[string]bool{
	"sriov-udn-binding-registration-kubevirt-" + releaseVersion + ".yaml":          true,
	"sriov-udn-binding-registration-kubevirt-pod-info-" + releaseVersion + ".yaml": true,
	"sriov-udn-binding-registration-hco-" + releaseVersion + ".yaml":               true,
}

// releasePodman is podman with storage of the test's own (vfs, runc, the ulimits these machines need: as
// test/container drives it), so nothing touches the host's images.
type releasePodman struct{ root string }

func (p releasePodman) global() []string {
	return []string{"--root", filepath.Join(p.root, "storage"), "--runroot", filepath.Join(p.root, "run"),
		"--tmpdir", filepath.Join(p.root, "libpod"), "--storage-driver", "vfs", "--runtime", "runc"}
}

func (p releasePodman) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("podman", append(p.global(), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "podman %s:\n%s", strings.Join(args, " "), stderr.String())
	return stdout.String()
}

// releaseSkipReason says why this machine cannot build images ("" when it can).
func releaseSkipReason() string {
	if os.Geteuid() != 0 {
		return "needs root: podman builds and runs the image as root here"
	}
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "needs podman and runc on PATH (apt-get install podman runc; .ci/run installs them)"
		}
	}
	return ""
}

// TestRelease runs `make release VERSION=v0.1.0 IMAGE_REPO=example.org/x` from the repository root with no
// registry, then checks what an operator gets: an image of that name, stamped with the version, that runs; an
// OCI archive that loads into another podman as the same image; and manifests, for every entry point, that
// decode strictly, name that image and nothing else, and carry the MutatingAdmissionPolicy version of their
// Kubernetes release; all listed in SHA256SUMS.
func TestRelease(t *testing.T) {
	if reason := releaseSkipReason(); reason != "" {
		t.Skip(reason)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	short, err := os.MkdirTemp("", "rel-") // podman refuses a runroot longer than 50 characters
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(short) })
	pm := releasePodman{root: short}
	t.Cleanup(func() {
		cmd := exec.Command("podman", append(pm.global(), "rmi", "--all", "--force")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("cleanup: podman rmi: %v %s", err, out)
		}
	})
	dir := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+releaseVersion, "IMAGE_REPO="+releaseRepo,
		"RELEASE_DIR="+dir, "PODMAN=podman "+strings.Join(pm.global(), " "))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make release:\n%s", out)
	t.Logf("make release:\n%s", tailOf(string(out), 20))

	hostArch := runtime.GOARCH
	require.Contains(t, releaseArches, hostArch, "this machine's architecture is one the release builds")

	t.Run("one image per architecture, with the version label, user 107 and the entrypoint; the host's runs", func(t *testing.T) {
		for _, arch := range releaseArches {
			var got []struct {
				Architecture string
				Os           string
				Config       struct {
					User       string
					Entrypoint []string
					Labels     map[string]string
				}
			}
			require.NoError(t, json.Unmarshal([]byte(pm.run(t, "image", "inspect", releaseImage+"-"+arch)), &got))
			require.Len(t, got, 1)
			assert.Equal(t, arch, got[0].Architecture, "%s", arch)
			assert.Equal(t, "linux", got[0].Os, "%s", arch)
			assert.Equal(t, releaseVersion, got[0].Config.Labels["org.opencontainers.image.version"], "%s", arch)
			assert.Equal(t, "107:107", got[0].Config.User, "%s", arch)
			assert.Equal(t, []string{"/sriov-udn-binding"}, got[0].Config.Entrypoint, "%s", arch)
		}
		version := pm.run(t, "run", "--rm", "--network", "none", "--read-only", "--ulimit", "nofile=1024:1024",
			"--ulimit", "nproc=1024:1024", releaseImage+"-"+hostArch, "--version")
		assert.Equal(t, releaseVersion, strings.TrimSpace(version), "the binary in the image is stamped")
	})

	t.Run("the release name is an image index of every architecture", func(t *testing.T) {
		var index struct {
			Manifests []struct {
				Digest   string
				Platform struct{ Architecture, OS string }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(pm.run(t, "manifest", "inspect", releaseImage)), &index))
		var platforms []string
		for _, m := range index.Manifests {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
		assert.ElementsMatch(t, platformsOf(releaseArches), platforms)
	})

	t.Run("the OCI archive holds the index, and loads elsewhere as the host's image", func(t *testing.T) {
		archive := filepath.Join(dir, "sriov-udn-binding-"+releaseVersion+".oci.tar")
		assert.ElementsMatch(t, platformsOf(releaseArches), ociArchivePlatforms(t, archive))
		// podman refuses a runroot longer than 50 characters: a short directory of its own.
		short, err := os.MkdirTemp("", "rel-")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(short) })
		other := releasePodman{root: short}
		loaded := other.run(t, "load", "--input", archive)
		t.Logf("podman load: %s", strings.TrimSpace(loaded))
		images := strings.Fields(other.run(t, "images", "--format", "{{.Id}}", "--no-trunc"))
		require.Len(t, images, 1, "podman load takes the host's image of the index")
		want := strings.TrimSpace(pm.run(t, "image", "inspect", "--format", "{{.Id}}", releaseImage+"-"+hostArch))
		assert.Equal(t, want, strings.TrimPrefix(images[0], "sha256:"), "the archive holds the release image")
		if out, err := exec.Command("podman", append(other.global(), "rmi", "--all", "--force")...).CombinedOutput(); err != nil {
			t.Logf("cleanup: podman rmi: %v %s", err, out)
		}
	})

	t.Run("each binary beside the image is built for its architecture, stamped, with its SBOM", func(t *testing.T) {
		for _, arch := range releaseArches {
			bin := filepath.Join(dir, "sriov-udn-binding-"+releaseVersion+"-linux-"+arch)
			info, err := buildinfo.ReadFile(bin)
			require.NoError(t, err, "%s", bin)
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			assert.Equal(t, arch, settings["GOARCH"], "%s", bin)
			assert.Equal(t, "0", settings["CGO_ENABLED"], "%s", bin)
			if arch == hostArch {
				v, err := exec.Command(bin, "--version").Output()
				require.NoError(t, err)
				assert.Equal(t, releaseVersion, strings.TrimSpace(string(v)))
			}
			checkSBOM(t, bin+".cdx.json", info)
		}
	})

	t.Run("every entry point's manifests name the release image, and nothing else", func(t *testing.T) {
		dec := strictDecoder(newScheme(t))
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		require.NoError(t, err)
		var names []string
		for _, f := range files {
			names = append(names, filepath.Base(f))
		}
		var want []string
		for name := range releaseFiles {
			want = append(want, name)
		}
		sort.Strings(names)
		sort.Strings(want)
		require.Equal(t, want, names)
		for name, wantMAP := range releaseFiles {
			t.Run(name, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err)
				assert.NotContains(t, string(data), "ghcr.io", "the image the repository's manifests name")
				docs, err := splitDocuments(name, data)
				require.NoError(t, err)
				var images []string
				maps := 0
				for _, d := range docs {
					obj, gvk, err := decodeManifest(dec, d.data)
					require.NoError(t, err, "document %d", d.index)
					checkObject(t, obj)
					switch o := obj.(type) {
					case *kubevirtv1.KubeVirt:
						images = append(images, o.Spec.Configuration.NetworkConfiguration.Binding[bindingName].SidecarImage)
					case *hyperConverged:
						images = append(images, o.Spec.NetworkBinding[bindingName].SidecarImage)
					case *admissionregistrationv1beta1.MutatingAdmissionPolicy, *admissionregistrationv1beta1.MutatingAdmissionPolicyBinding:
						maps++
						assert.Equal(t, wantMAP, gvk.GroupVersion().String(), "%s %s", gvk.Kind, o.(interface{ GetName() string }).GetName())
					}
				}
				if releaseRegistrations[name] {
					assert.Equal(t, []string{releaseImage}, images, "the KubeVirt (or HyperConverged) CR's sidecarImage")
					assert.Len(t, docs, 1, "a registration is one merge patch")
				} else {
					assert.Empty(t, images, "an entry point holds no KubeVirt or HyperConverged CR")
				}
				if wantMAP == "" {
					assert.Zero(t, maps)
				} else {
					assert.NotZero(t, maps)
				}
			})
		}
	})

	t.Run("SHA256SUMS lists every file with its digest", func(t *testing.T) {
		sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		require.NoError(t, err)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		listed := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
			sum, file, ok := strings.Cut(line, "  ")
			require.True(t, ok, "line %q", line)
			listed[file] = sum
		}
		for _, e := range entries {
			if e.Name() == "SHA256SUMS" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			digest := sha256.Sum256(data)
			assert.Equal(t, hex.EncodeToString(digest[:]), listed[e.Name()], "%s", e.Name())
		}
		assert.Len(t, listed, len(entries)-1)
	})
}

// TestRelease_RefusesAVersionThatIsNotOne: a release is vMAJOR.MINOR.PATCH, never the commit describe.
func TestRelease_RefusesAVersionThatIsNotOne(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, v := range []string{"v0.1", "0.1.0", "v0.1.0-3-gabcdef0-dirty!", "dev"} {
		cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+v, "IMAGE_REPO="+releaseRepo,
			"RELEASE_DIR="+filepath.Join(t.TempDir(), "r"), "PODMAN=false")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "VERSION=%s: %s", v, out)
		assert.Contains(t, string(out), fmt.Sprintf("VERSION=%s is not a release version", v))
	}
}

func platformsOf(arches []string) []string {
	var out []string
	for _, a := range arches {
		out = append(out, "linux/"+a)
	}
	return out
}

// ociArchivePlatforms reads an OCI archive (a tar of an OCI image layout) and returns the platforms of the
// image index its index.json points to.
func ociArchivePlatforms(t *testing.T, archive string) []string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	blobs := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s", archive)
		if h.Name != "index.json" && !strings.HasPrefix(h.Name, "blobs/sha256/") {
			continue
		}
		if h.Size > 1<<20 { // a layer: not needed here
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		blobs[strings.TrimPrefix(h.Name, "blobs/sha256/")] = data
	}
	type descriptor struct {
		MediaType string
		Digest    string
		Platform  *struct{ Architecture, OS string }
	}
	var top struct{ Manifests []descriptor }
	require.NoError(t, json.Unmarshal(blobs["index.json"], &top), "%s: index.json", archive)
	require.Len(t, top.Manifests, 1, "%s: index.json names one image index", archive)
	require.Equal(t, "application/vnd.oci.image.index.v1+json", top.Manifests[0].MediaType)
	var index struct{ Manifests []descriptor }
	require.NoError(t, json.Unmarshal(blobs[strings.TrimPrefix(top.Manifests[0].Digest, "sha256:")], &index))
	var out []string
	for _, m := range index.Manifests {
		require.NotNil(t, m.Platform, "%s: %s has no platform", archive, m.Digest)
		out = append(out, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	return out
}

// checkSBOM checks a CycloneDX SBOM against the build info of the binary it describes: the main component
// is the release, and every module the binary links is a component at the version it was built with.
func checkSBOM(t *testing.T, file string, info *buildinfo.BuildInfo) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string }
		}
		Components []struct{ Name, Version string }
	}
	require.NoError(t, json.Unmarshal(data, &bom), "%s", file)
	assert.Equal(t, "CycloneDX", bom.BOMFormat, "%s", file)
	assert.Equal(t, info.Main.Path, bom.Metadata.Component.Name, "%s: main component", file)
	assert.Equal(t, releaseVersion, bom.Metadata.Component.Version, "%s: main component", file)
	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
	}
	require.NotEmpty(t, info.Deps)
	for _, dep := range info.Deps {
		mod := dep
		if dep.Replace != nil {
			mod = dep.Replace
		}
		assert.Equal(t, mod.Version, listed[mod.Path], "%s: module %s", file, mod.Path)
	}
}

func tailOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
