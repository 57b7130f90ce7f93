package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// Hotplug is the stand-in for Multus' dynamic networks controller
// (https://github.com/k8snetworkplumbingwg/multus-dynamic-networks-controller): when the networks annotation
// of a pod this plugin set up gains a network, it attaches that network in the pod's netns as ADD attaches one
// (the link first, named as the annotation asks), then adds its entry to the pod's network-status; it returns
// the interfaces it published. KubeVirt's NIC hot-plug waits for exactly that entry (its interface name) before
// virt-handler looks for the link in the pod. Only bridge networks can be hot-plugged; a network whose entry is
// published already is left alone, and nothing is done before ADD has published the pod's network-status.
func Hotplug(ctx context.Context, conf *Config, cluster Cluster, pod *corev1.Pod) ([]string, error) {
	statusValue, ok := pod.Annotations[NetworkStatusAnnotation]
	if !ok {
		return nil, nil // ADD has not finished
	}
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(statusValue), &statuses); err != nil {
		return nil, fmt.Errorf("pod %s/%s %s: %w", pod.Namespace, pod.Name, NetworkStatusAnnotation, err)
	}
	st, err := podState(conf, pod.Namespace, pod.Name)
	if err != nil || st == nil {
		return nil, err
	}
	p := &Plugin{Conf: conf, Cluster: cluster, Env: Env{Command: "ADD", ContainerID: st.ContainerID, Netns: st.Netns, IfName: st.IfName,
		Args: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s", pod.Namespace, pod.Name)}}
	plans, err := p.plan(ctx, pod.Namespace, pod.Annotations[NetworksAnnotation])
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	published := map[string]bool{}
	for _, s := range statuses {
		published[s.Interface] = true
	}
	var added []string
	for _, a := range plans {
		if published[a.PodIface] || a.NAD.Type == typeNone {
			continue
		}
		if recorded := st.attachment(a.PodIface); recorded != nil {
			// Attached by an earlier call whose patch did not land: publish it now.
			if recorded.Link == nil || len(recorded.Link.Result) == 0 {
				continue // ADD's own, or a failed attach: DEL undoes it
			}
			if a.MAC, err = sandboxMAC(recorded.Link.Result, a.PodIface); err != nil {
				return nil, err
			}
		} else {
			if a.NAD.Type != typeBridge {
				return nil, fmt.Errorf("pod %s/%s: network %s/%s is %s: only bridge networks can be hot-plugged here",
					pod.Namespace, pod.Name, a.Selection.Namespace, a.Selection.Name, a.NAD.Type)
			}
			if err := p.attach(ctx, st, &a); err != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
		s, err := attachmentStatus(a)
		if err != nil {
			return nil, err
		}
		statuses = append(statuses, s)
		added = append(added, a.PodIface)
	}
	if len(added) == 0 {
		return nil, nil
	}
	b, err := json.MarshalIndent(statuses, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("marshal %s of pod %s/%s: %w", NetworkStatusAnnotation, pod.Namespace, pod.Name, err)
	}
	if err := cluster.PatchPodAnnotations(ctx, pod.Namespace, pod.Name, map[string]string{NetworkStatusAnnotation: string(b)}); err != nil {
		return nil, err
	}
	return added, nil
}

// attachment returns the recorded attachment of the pod interface ifname, or nil.
func (st *State) attachment(ifname string) *AttachmentState {
	for i := range st.Attachments {
		if st.Attachments[i].PodIface == ifname {
			return &st.Attachments[i]
		}
	}
	return nil
}

// podState finds the state ADD recorded for the pod's sandbox whose netns still exists; (nil, nil) when
// there is none.
func podState(c *Config, namespace, name string) (*State, error) {
	entries, err := os.ReadDir(stateDir(c))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, withCode(codeIOError, fmt.Errorf("state dir: %w", err))
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(stateDir(c), e.Name()))
		if err != nil {
			continue // removed by a DEL meanwhile
		}
		var st State
		if json.Unmarshal(b, &st) != nil || st.PodNamespace != namespace || st.PodName != name {
			continue
		}
		if _, err := os.Stat(st.Netns); err == nil {
			return &st, nil
		}
	}
	return nil, nil
}

// runHotplug runs Hotplug for every pod change until ctx ends: conflist is the node's CNI config file, whose
// first plugin is this one's entry. Failures are retried with the work queue's backoff.
func runHotplug(ctx context.Context, conflist string, log *slog.Logger) error {
	data, err := os.ReadFile(conflist)
	if err != nil {
		return fmt.Errorf("hotplug: %w", err)
	}
	var list struct {
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(data, &list); err != nil || len(list.Plugins) == 0 {
		return fmt.Errorf("hotplug: %s: no plugins list (%v)", conflist, err)
	}
	conf, err := parseConfig(list.Plugins[0])
	if err != nil {
		return fmt.Errorf("hotplug: %s: %w", conflist, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", conf.Kubeconfig)
	if err != nil {
		return fmt.Errorf("hotplug: kubeconfig %s: %w", conf.Kubeconfig, err)
	}
	rc.UserAgent = "cluster-cni hotplug (stand-in for Multus' dynamic networks controller, test-only)"
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("hotplug: %w", err)
	}
	cluster, err := newKubeCluster(conf)
	if err != nil {
		return fmt.Errorf("hotplug: %w", err)
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	factory := informers.NewSharedInformerFactory(core, 0)
	pods := factory.Core().V1().Pods()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("hotplug: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return fmt.Errorf("hotplug: the pod cache did not sync: %w", ctx.Err())
	}
	log.Info("hotplug: watching pods", "conflist", conflist)
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		func() {
			defer queue.Done(key)
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			pod, err := pods.Lister().Pods(ns).Get(name)
			if err != nil {
				queue.Forget(key) // deleted
				return
			}
			callCtx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			start := time.Now()
			added, err := Hotplug(callCtx, conf, cluster, pod)
			if err != nil {
				log.Error("hotplug: failed", "pod", key, "err", err, "retries", queue.NumRequeues(key))
				queue.AddRateLimited(key)
				return
			}
			queue.Forget(key)
			if len(added) > 0 {
				log.Info("hotplug: attached", "pod", key, "interfaces", added, "took", time.Since(start).Round(time.Millisecond))
			}
		}()
	}
}
