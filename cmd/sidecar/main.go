package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// version is stamped at build time: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// One P. The sidecar's work is a handful of short hook calls per VM start, each on a fresh gRPC
	// connection (hooks/manager.go dials per call); with more Ps, every connection hands its
	// goroutines between OS threads, and the futex wake-ups cost 25% more CPU per call and 10% more
	// latency on 2 CPUs (test/bench). GOMAXPROCS in the environment still decides.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the process exit code: 0 on a clean stop, 1 on a runtime failure, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "render" {
		return runRender(args[1:], stdout, stderr)
	}
	cfg, err := parseFlags(args, os.LookupEnv, stdout)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sriov-udn-binding: %v\n", err)
		return 2
	}
	if cfg.showVersion {
		fmt.Fprintln(stdout, version)
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "sriov-udn-binding: %v\n", err)
		return 1
	}
	return 0
}
