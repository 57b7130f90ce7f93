package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// packages are what `cloud-init devel net-convert` needs in a minbase root: without python3-cffi-backend
// cloud-init's Python imports fail there (as in the guest images, test/guest/image.go), and the networkd
// renderer of cloud-init 25 chowns its units to the systemd-network user, which the systemd package
// creates (cloudinit/net/networkd.py).
var packages = []string{"cloud-init", "python3-cffi-backend", "systemd"}

func main() {
	cacheDir := flag.String("cache-dir", "/var/cache/sriov-udn-binding/roots", "cache of debootstrap roots")
	suite := flag.String("suite", "trixie", "Debian suite whose cloud-init the root holds")
	timeout := flag.Duration("timeout", 20*time.Minute, "bound on building the root")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	start := time.Now()
	dir, built, err := debroot.Ensure(ctx, *cacheDir, debroot.Spec{Suite: *suite, Packages: packages}, logf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cloudinit-root: %s root with %s: %v\n", *suite, strings.Join(packages, ","), err)
		os.Exit(1)
	}
	if built {
		logf("cloudinit-root: built %s in %s", dir, time.Since(start).Round(time.Second))
	}
	fmt.Println(dir)
}
