// Command guest-prefetch builds, one after another, the cached guest images and trixie roots that the guest,
// VF, VFIO and libvirt tests need, so that `.ci/run` can start it in the background at its beginning and a cold
// run builds them (network and dpkg bound) while it compiles and runs the other suites (CPU bound). Every
// builder holds a flock on its cache entry, so a test that needs an entry still being built waits for it; a
// failure here only costs time: the test builds the entry itself. With warm caches it does nothing. Needs
// root (debootstrap, mmdebstrap).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/guest"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

func main() {
	timeout := flag.Duration("timeout", time.Hour, "bound on all the builds")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }

	cacheDir := os.Getenv("GUEST_CACHE_DIR")
	if cacheDir == "" {
		cacheDir = "/var/cache/sriov-udn-binding/guest"
	}
	type step struct {
		name  string
		build func() error
	}
	image := func(spec guest.ImageSpec) func() error {
		return func() error { _, _, err := guest.EnsureImage(ctx, cacheDir, spec, logf); return err }
	}
	// In the order test/guest reaches them (it starts beside the other suites, so an entry it waits for delays
	// the run's end): the floor image, the trixie tools root (qemu 10 and libvirt for the VF, VFIO and libvirt
	// tests), the VFIO node root (its test runs first and alone), the VF guest image, the matrix's other images.
	matrix := guest.ImageMatrix()
	steps := []step{{matrix[0].Name, image(matrix[0].Spec)}}
	steps = append(steps,
		step{"trixie tools root", func() error {
			_, err := trixietools.Ensure(ctx, trixietools.DefaultCacheDir(), logf)
			return err
		}},
		step{"VFIO node root", func() error {
			_, _, err := debroot.Ensure(ctx, trixietools.DefaultCacheDir(), guest.VFIONodeSpec(), logf)
			return err
		}},
		step{"VF guest image", image(guest.VFImageSpec())},
		// test/cluster's guest (make test-cluster runs after test-guest has started).
		step{"cluster guest image", image(guest.ClusterImageSpec())},
	)
	for _, img := range matrix[1:] {
		steps = append(steps, step{img.Name, image(img.Spec)})
	}
	failed := 0
	for _, s := range steps {
		start := time.Now()
		if err := s.build(); err != nil {
			failed++
			fmt.Printf("guest-prefetch: %s: %v (the test that needs it builds it again)\n", s.name, err)
			continue
		}
		fmt.Printf("guest-prefetch: %s ready in %s\n", s.name, time.Since(start).Round(time.Second))
	}
	if failed > 0 {
		os.Exit(1)
	}
}
