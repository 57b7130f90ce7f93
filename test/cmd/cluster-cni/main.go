package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// timeout bounds one invocation; the runtime has its own, longer ones.
const timeout = 2 * time.Minute

func main() {
	// `cluster-cni hotplug <conflist>`: the long-running stand-in for Multus' dynamic networks controller
	// (Hotplug), started by the node beside kubelet. Otherwise one CNI invocation.
	if len(os.Args) == 3 && os.Args[1] == "hotplug" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
		if err := runHotplug(ctx, os.Args[2], log); err != nil {
			log.Error("hotplug: stopped", "err", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(os.Stdin, os.Stdout, os.Getenv, newKubeCluster))
}

// run is one CNI invocation: it reads the config from stdin, the CNI_* variables through getenv, and
// writes the result (ADD), the version info (VERSION) or the error JSON to stdout. It returns the exit
// status. newCluster is called for ADD only.
func run(stdin io.Reader, stdout io.Writer, getenv func(string) string, newCluster func(*Config) (Cluster, error)) (status int) {
	env := envFrom(getenv)
	defer func() {
		if r := recover(); r != nil {
			status = fail(stdout, withCode(codeInternal, fmt.Errorf("CNI_COMMAND %s: internal error: %v", env.Command, r)))
		}
	}()
	data, err := io.ReadAll(io.LimitReader(stdin, maxConfigSize+1))
	if err != nil {
		return fail(stdout, withCode(codeIOError, fmt.Errorf("read stdin: %w", err)))
	}
	if env.Command == "VERSION" {
		return write(stdout, map[string]any{"cniVersion": cniVersion, "supportedVersions": []string{cniVersion}})
	}
	conf, err := parseConfig(data)
	if err != nil {
		return fail(stdout, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p := &Plugin{Conf: conf, Env: env}
	switch env.Command {
	case "ADD":
		if p.Cluster, err = newCluster(conf); err != nil {
			return fail(stdout, err)
		}
		out, err := p.Add(ctx)
		if err != nil {
			return fail(stdout, fmt.Errorf("ADD container %s: %w", env.ContainerID, err))
		}
		if _, err := stdout.Write(out); err != nil {
			return 1
		}
		return 0
	case "DEL":
		if err := p.Del(ctx); err != nil {
			return fail(stdout, fmt.Errorf("DEL container %s: %w", env.ContainerID, err))
		}
		return 0
	case "CHECK":
		if err := p.Check(ctx); err != nil {
			return fail(stdout, fmt.Errorf("CHECK container %s: %w", env.ContainerID, err))
		}
		return 0
	default:
		return fail(stdout, withCode(codeInvalidEnv, fmt.Errorf("CNI_COMMAND %q is not ADD, DEL, CHECK or VERSION", env.Command)))
	}
}

// fail prints the CNI error JSON and returns the exit status 1.
func fail(stdout io.Writer, err error) int {
	write(stdout, cniError{CNIVersion: cniVersion, Code: errorCode(err), Msg: err.Error()})
	return 1
}

func write(stdout io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 1
	}
	if _, err := stdout.Write(append(b, '\n')); err != nil {
		return 1
	}
	return 0
}
