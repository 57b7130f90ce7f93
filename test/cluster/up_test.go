package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

// upStateEnv, when set (by `make cluster-up`), makes the test binary bring the cluster up as the suite does
// (the node, KubeVirt, our binding registered) and keep it instead of running the tests, until SIGTERM or
// SIGINT (`make cluster-down`); then it takes the node down and checks the host for leftovers as after the
// suite. Its value is a directory for what the Makefile reads:
//   - kubeconfig: the admin's kubeconfig for a host kubectl (the node's apiserver through a forward this
//     process holds), written once the cluster is ready;
//   - kubectl: the cluster's kubectl;
//   - exit: the exit code, written last (0: the node stopped and left nothing on the host).
//
// CLUSTER_KUBEVIRT=patched (default stock) makes virt-handler and virt-launcher the ones built with
// patches/kubevirt.
const upStateEnv = "SRIOV_UDN_CLUSTER_UP"

func keepUp(state string) int {
	code := runWithNode(func(e *env) int {
		if err := serveUp(e, state); err != nil {
			logf("cluster-up: %v", err)
			return 1
		}
		return 0
	}, false)
	if err := os.WriteFile(filepath.Join(state, "exit"), []byte(strconv.Itoa(code)+"\n"), 0o644); err != nil {
		logf("cluster-up: %v", err)
		return 1
	}
	return code
}

// serveUp readies the cluster for a user and blocks until SIGTERM or SIGINT.
func serveUp(e *env, state string) error {
	ctx := context.Background()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	switch kv := os.Getenv("CLUSTER_KUBEVIRT"); kv {
	case "", "stock":
	case "patched":
		if err := e.node.UseVirtHandler(ctx, VirtHandlerPatchedImage); err != nil {
			return err
		}
		if err := e.node.UseVirtLauncher(ctx, VirtLauncherPatchedImage); err != nil {
			return err
		}
		logf("cluster-up: virt-handler and virt-launcher built with patches/kubevirt")
	default:
		return fmt.Errorf("CLUSTER_KUBEVIRT=%q: want stock or patched", kv)
	}
	kubeconfig, err := e.node.HostKubeconfig()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return err
	}
	kubectl, err := os.ReadFile(e.node.KubectlBinary())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "kubectl"), kubectl, 0o755); err != nil {
		return err
	}
	// Last: its presence tells `make cluster-up` that the cluster is ready.
	if err := os.WriteFile(filepath.Join(state, "kubeconfig"), data, 0o600); err != nil {
		return err
	}
	logf("cluster-up: ready; KUBECONFIG=%s", filepath.Join(state, "kubeconfig"))
	sig := <-stop
	logf("cluster-up: %v: taking the cluster down", sig)
	return os.Remove(filepath.Join(state, "kubeconfig"))
}
