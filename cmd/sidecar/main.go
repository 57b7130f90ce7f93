package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped at build time: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the process exit code: 0 on a clean stop, 1 on a runtime failure, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "render" {
		return runRender(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "webhook" {
		return runWebhook(args[1:], stdout, stderr)
	}
	cfg, err := parseFlags(args, os.LookupEnv, stdout)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sriov-udn-binding: %v\n", err)
		if hint := renderHint(args); hint != "" {
			fmt.Fprintln(stderr, hint)
		}
		return 2
	}
	if cfg.showVersion {
		fmt.Fprintln(stdout, version)
		return 0
	}

	// SIGHUP too: a closed terminal or a runtime's hang-up must stop the sidecar cleanly (socket
	// removed, exit 0) rather than kill it with the socket left behind.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if serve(ctx, cfg, stderr) != nil {
		return 1 // serve logged it
	}
	return 0
}
