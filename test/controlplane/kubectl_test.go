package controlplane_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/kubectl/pkg/cmd/apply"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// kubectl runs kubectl's own commands (k8s.io/kubectl v0.34.2, the version of the server) in-process
// against the cluster, through a kubeconfig file as a user's kubectl would.
type kubectl struct {
	factory cmdutil.Factory
}

func newKubectl(t *testing.T, config *rest.Config) *kubectl {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   config.Host,
		CertificateAuthority:     config.CAFile,
		CertificateAuthorityData: config.CAData,
		TLSServerName:            config.ServerName,
	}
	kubeconfig.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: config.BearerToken}
	kubeconfig.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kubeconfig.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kubeconfig, path))

	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &path
	return &kubectl{factory: cmdutil.NewFactory(cmdutil.NewMatchVersionFlags(flags))}
}

// applyKustomize is `kubectl apply -k dir`: kustomize build (kubectl's embedded kustomize), then a
// client-side apply of every object. It returns kubectl's output, or the error kubectl would print.
func (k *kubectl) applyKustomize(dir string) (string, error) {
	var out bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out}
	flags := apply.NewApplyFlags(streams)
	cmd := &cobra.Command{Use: "apply"}
	flags.AddFlags(cmd)
	if err := cmd.Flags().Set("kustomize", dir); err != nil {
		return "", err
	}
	o, err := flags.ToOptions(k.factory, cmd, "kubectl", nil)
	if err != nil {
		return out.String(), err
	}
	if err := o.Validate(); err != nil {
		return out.String(), err
	}
	err = o.Run()
	return out.String(), err
}
