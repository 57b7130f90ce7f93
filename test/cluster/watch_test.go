package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var vmiResource = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// vmiWatch records every state of one VMI the apiserver stores from the moment it starts: a watch from the
// VMI's resourceVersion then, resumed from the last one seen when the apiserver ends it, so no status that
// virt-handler writes is missed (a poll sees only the states that happen to be current when it reads).
type vmiWatch struct {
	name string
	mu   sync.Mutex
	seen []*kubevirtv1.VirtualMachineInstance
	err  error
	more chan struct{} // closed and replaced on each state recorded, and when the watch ends
	stop context.CancelFunc
}

// watchVMI starts recording the VMI name's states, its current one first; the watch stops when the test ends.
func watchVMI(ctx context.Context, t *testing.T, e *env, name string) *vmiWatch {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", e.node.Kubeconfig)
	if err != nil {
		t.Fatalf("cluster: admin kubeconfig: %v", err)
	}
	cfg.Dial = e.node.Dial
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("cluster: dynamic client: %v", err)
	}
	vmis := dc.Resource(vmiResource).Namespace("default")
	cur, err := vmis.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cluster: VMI %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &vmiWatch{name: name, more: make(chan struct{}), stop: cancel}
	t.Cleanup(cancel)
	w.record(cur)
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, cur.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=" + name
			return vmis.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatalf("cluster: watch VMI %s: %v", name, err)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				w.end(ctx.Err())
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					w.end(fmt.Errorf("the watch of VMI %s ended", name))
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					w.record(ev.Object.(*unstructured.Unstructured))
				case watch.Deleted:
					w.end(fmt.Errorf("VMI %s was deleted", name))
					return
				case watch.Error:
					w.end(fmt.Errorf("watch of VMI %s: %v", name, ev.Object))
					return
				}
			}
		}
	}()
	return w
}

func (w *vmiWatch) record(u *unstructured.Unstructured) {
	var vmi kubevirtv1.VirtualMachineInstance
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vmi)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.err = fmt.Errorf("VMI %s at resourceVersion %s: %w", w.name, u.GetResourceVersion(), err)
	} else {
		w.seen = append(w.seen, &vmi)
	}
	close(w.more)
	w.more = make(chan struct{})
}

func (w *vmiWatch) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	close(w.more)
	w.more = make(chan struct{})
}

// mark is the number of states recorded so far: since(mark) and until(mark, ...) look only at later ones.
func (w *vmiWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// since returns the states recorded from index from on.
func (w *vmiWatch) since(from int) []*kubevirtv1.VirtualMachineInstance {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*kubevirtv1.VirtualMachineInstance(nil), w.seen[min(from, len(w.seen)):]...)
}

// until waits for the first state from index from on that ok accepts (nil), and returns it with its index;
// the error names what it waited for and ok's last reason.
func (w *vmiWatch) until(ctx context.Context, from int, what string, timeout time.Duration, ok func(*kubevirtv1.VirtualMachineInstance) error) (*kubevirtv1.VirtualMachineInstance, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := fmt.Errorf("no state of VMI %s recorded", w.name)
	for i := from; ; {
		w.mu.Lock()
		seen, err, more := w.seen, w.err, w.more
		w.mu.Unlock()
		for ; i < len(seen); i++ {
			if last = ok(seen[i]); last == nil {
				return seen[i], i, nil
			}
		}
		if err != nil {
			return nil, i, fmt.Errorf("waiting for %s: %w (last: %v)", what, err, last)
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, i, fmt.Errorf("waiting for %s: %w after %d VMI states (last: %v)", what, ctx.Err(), i, last)
		}
	}
}
