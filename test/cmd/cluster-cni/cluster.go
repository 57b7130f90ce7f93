package main

import (
	"context"
	"encoding/json"
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is what the plugin needs of the apiserver. kubeCluster is the one real implementation; the tests
// use an in-memory one, and the real apiserver is exercised in the registry-free cluster.
type Cluster interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	NAD(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)
	// PatchPodAnnotations sets the annotations on the pod with one JSON merge patch.
	PatchPodAnnotations(ctx context.Context, namespace, name string, annotations map[string]string) error
}

// kubeCluster is Cluster on client-go's typed clients.
type kubeCluster struct {
	core kubernetes.Interface
	nad  nadclient.Interface
}

// newKubeCluster builds the clients from the config's kubeconfig file.
func newKubeCluster(c *Config) (Cluster, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, withCode(codeAPIServer, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err))
	}
	rc.UserAgent = "cluster-cni (stand-in for Multus and OVN-Kubernetes, test-only)"
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, withCode(codeAPIServer, fmt.Errorf("kubeconfig %s: core client: %w", c.Kubeconfig, err))
	}
	nad, err := nadclient.NewForConfig(rc)
	if err != nil {
		return nil, withCode(codeAPIServer, fmt.Errorf("kubeconfig %s: NAD client: %w", c.Kubeconfig, err))
	}
	return &kubeCluster{core: core, nad: nad}, nil
}

func (k *kubeCluster) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := k.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, withCode(codeAPIServer, fmt.Errorf("get pod %s/%s: %w", namespace, name, err))
	}
	return pod, nil
}

func (k *kubeCluster) NAD(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	nad, err := k.nad.K8sCniCncfIoV1().NetworkAttachmentDefinitions(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, withCode(codeAPIServer, fmt.Errorf("get NetworkAttachmentDefinition %s/%s: %w", namespace, name, err))
	}
	return nad, nil
}

func (k *kubeCluster) PatchPodAnnotations(ctx context.Context, namespace, name string, annotations map[string]string) error {
	patch, err := mergePatch(annotations)
	if err != nil {
		return err
	}
	if _, err := k.core.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return withCode(codeAPIServer, fmt.Errorf("patch annotations of pod %s/%s: %w", namespace, name, err))
	}
	return nil
}

// mergePatch is the JSON merge patch (RFC 7386) that sets the annotations.
func mergePatch(annotations map[string]string) ([]byte, error) {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return nil, fmt.Errorf("marshal annotation patch: %w", err)
	}
	return b, nil
}
