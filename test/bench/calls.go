package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/metrics"
	"strings"
	"time"

	v1 "kubevirt.io/api/core/v1"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks"
	hooksInfo "kubevirt.io/kubevirt/pkg/hooks/info"
	hooksV1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
	grpcutil "kubevirt.io/kubevirt/pkg/util/net/grpc"
)

// CallInfo does what the hook Manager does when it finds a socket (manager.go processSideCarSocket):
// dial with a 1 s timeout, Info with a 1 s deadline, close.
func CallInfo(socket string) (*hooksInfo.InfoResult, error) {
	conn, err := grpcutil.DialSocketWithTimeout(socket, 1)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := hooksInfo.NewInfoClient(conn).Info(ctx, &hooksInfo.InfoParams{})
	if err != nil {
		return nil, fmt.Errorf("hook Info on %s: %w", socket, err)
	}
	return res, nil
}

// CallOnDefineDomain calls v1alpha3 OnDefineDomain the way the Manager does (fresh connection,
// 1 minute deadline). The bench calls it directly so that the peer, whose socket is not where the
// Manager looks, gets exactly the same calls as ours.
func CallOnDefineDomain(socket string, domainXML, vmiJSON []byte) error {
	conn, err := grpcutil.DialSocketWithTimeout(socket, 1)
	if err != nil {
		return fmt.Errorf("dial %s: %w", socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := hooksV1alpha3.NewCallbacksClient(conn).OnDefineDomain(ctx,
		&hooksV1alpha3.OnDefineDomainParams{DomainXML: domainXML, Vmi: vmiJSON})
	if err != nil {
		return fmt.Errorf("OnDefineDomain on %s: %w", socket, err)
	}
	if len(res.GetDomainXML()) == 0 {
		return fmt.Errorf("OnDefineDomain on %s: empty domain XML", socket)
	}
	return nil
}

// Load makes n rounds of Info + OnDefineDomain against socket and summarises each round's time:
// the same calls to ours and the peer, so their ratio is a latency comparison that survives a
// noisy machine.
func Load(socket string, n int, vmi *v1.VirtualMachineInstance) (Summary, error) {
	domainXML, err := DomainXML()
	if err != nil {
		return Summary{}, err
	}
	vmiJSON, err := json.Marshal(vmi)
	if err != nil {
		return Summary{}, fmt.Errorf("marshal VMI: %w", err)
	}
	rounds := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := CallInfo(socket); err != nil {
			return Summary{}, fmt.Errorf("call %d: %w", i, err)
		}
		if err := CallOnDefineDomain(socket, domainXML, vmiJSON); err != nil {
			return Summary{}, fmt.Errorf("call %d: %w", i, err)
		}
		rounds = append(rounds, time.Since(t0))
	}
	return Summarize(rounds), nil
}

// HookLatency is Info + PreCloudInitIso per round: ours through KubeVirt's hook Manager, the peer
// through the same calls made directly (CallPreCloudInitIso), alternating in each round.
type HookLatency struct {
	Ours HookFigures `json:"ours"`
	Peer HookFigures `json:"peer"`
	// NetworkDataChanged is true when our sidecar changed NetworkData (false = pass-through floor).
	NetworkDataChanged bool `json:"network_data_changed"`
}

// HookFigures summarises one sidecar's rounds.
type HookFigures struct {
	Total           Summary `json:"total"`
	Info            Summary `json:"info"`
	PreCloudInitIso Summary `json:"pre_cloud_init_iso"`
	// NoBenchGC keeps the rounds during which the bench process itself, which plays virt-launcher's
	// part, ran no garbage collection: its heap is a few MiB, so its GC runs every ~40 rounds and
	// lands in the calls of both sidecars alike; virt-launcher's larger heap collects far less often.
	NoBenchGC Summary `json:"total_without_bench_gc"`
}

type hookRounds struct{ total, info, pci, noGC []time.Duration }

func (h *hookRounds) add(t0, t1, t2 time.Time, benchGC bool) {
	h.total, h.info, h.pci = append(h.total, t2.Sub(t0)), append(h.info, t1.Sub(t0)), append(h.pci, t2.Sub(t1))
	if !benchGC {
		h.noGC = append(h.noGC, t2.Sub(t0))
	}
}

func (h *hookRounds) figures() HookFigures {
	return HookFigures{Total: Summarize(h.total), Info: Summarize(h.info), PreCloudInitIso: Summarize(h.pci), NoBenchGC: Summarize(h.noGC)}
}

// MeasureHookLatency makes n rounds. Ours: Info as the Manager's Collect does (Collect itself cannot
// be repeated: it always waits a 300 ms tick), then Manager.PreCloudInitIso; the Manager must have
// collected exactly our sidecar. The peer: Info, then CallPreCloudInitIso, the same calls; its
// handler passes the data through, so it is the floor of KubeVirt's call pattern on this machine.
// Which of the two goes first alternates from round to round.
func MeasureHookLatency(mgr hooks.Manager, ours, peer string, vmi *v1.VirtualMachineInstance, n int) (HookLatency, error) {
	var res HookLatency
	in, err := CloudInitData(vmi)
	if err != nil {
		return res, err
	}
	var o, p hookRounds
	round := func(socket string, into *hookRounds, preCloudInitIso func(*cloudinit.CloudInitData) (*cloudinit.CloudInitData, error)) error {
		g0, t0 := gcCycles(), time.Now()
		if _, err := CallInfo(socket); err != nil {
			return err
		}
		t1 := time.Now()
		data := *in
		out, err := preCloudInitIso(&data)
		if err != nil {
			return err
		}
		into.add(t0, t1, time.Now(), gcCycles() != g0)
		if out == nil || out.UserData == "" {
			return fmt.Errorf("PreCloudInitIso on %s returned no user data", socket)
		}
		if into == &o {
			res.NetworkDataChanged = res.NetworkDataChanged || out.NetworkData != in.NetworkData
		}
		return nil
	}
	callOurs := func() error {
		return round(ours, &o, func(d *cloudinit.CloudInitData) (*cloudinit.CloudInitData, error) {
			out, err := mgr.PreCloudInitIso(vmi, d)
			if err != nil {
				return nil, fmt.Errorf("hook Manager PreCloudInitIso on %s: %w", ours, err)
			}
			return out, nil
		})
	}
	callPeer := func() error {
		return round(peer, &p, func(d *cloudinit.CloudInitData) (*cloudinit.CloudInitData, error) {
			return CallPreCloudInitIso(peer, vmi, d)
		})
	}
	for i := range n {
		first, second := callOurs, callPeer
		if i%2 == 1 {
			first, second = callPeer, callOurs
		}
		if err := first(); err != nil {
			return res, fmt.Errorf("round %d: %w", i, err)
		}
		if err := second(); err != nil {
			return res, fmt.Errorf("round %d: %w", i, err)
		}
	}
	res.Ours, res.Peer = o.figures(), p.figures()
	return res, nil
}

// gcCycles is the number of GC cycles this process has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// SwapLatency is the time from kubelet's volume update to the return of a hook that waited for it.
type SwapLatency struct {
	// FromWrite runs from the start of AtomicWriter.Write (which creates the timestamped dir,
	// swaps ..data and removes the old dir) to the hook's return: conservative.
	FromWrite Summary `json:"from_write_start"`
	// Write is AtomicWriter.Write alone.
	Write Summary `json:"write"`
	// Waited counts calls still pending when the swap started; Returned early counts calls that
	// returned before it (a pass-through sidecar never waits).
	Waited        int     `json:"waited"`
	ReturnedEarly int     `json:"returned_early"`
	EarlyCall     Summary `json:"early_call"`
}

// waitingGrace bounds how long the bench waits for a log line saying the hook waits before it
// swaps anyway; the hook needs a fraction of a millisecond to reach its wait.
const waitingGrace = 20 * time.Millisecond

// PodInfoWriter writes the pod-info volume as kubelet does (harness.Pod, harness.Volume).
type PodInfoWriter interface {
	WritePodInfo(labels, annotations map[string]string) error
}

// MeasureSwap runs n rounds: a VMI whose bound interface is network swap<i> on NAD ns1/swap-<i>, absent from the
// current annotations, so PreCloudInitIso waits; then the annotations gain that NAD (and lose the
// previous one) through AtomicWriter, and the hook's return is timed. lines (may be nil) are the
// sidecar's stderr lines: one mentioning "wait" tells the bench the hook is blocked.
func MeasureSwap(mgr hooks.Manager, podInfo PodInfoWriter, lines <-chan string, n int) (SwapLatency, error) {
	var res SwapLatency
	var fromWrite, writes, early []time.Duration
	for i := 1; i <= n; i++ {
		// Both the VMI network name (hence the hashed pod interface name) and the NAD are new each
		// round: the current annotations have nothing for them, so the hook must wait.
		ifaces := Ifaces(1, fmt.Sprintf("swap-%d", i))
		ifaces[0].Network = fmt.Sprintf("swap%d", i)
		vmi := VMI(ifaces)
		in, err := CloudInitData(vmi)
		if err != nil {
			return res, err
		}
		ann, err := Annotations(ifaces, 0)
		if err != nil {
			return res, err
		}
		drain(lines)
		type result struct {
			at  time.Time
			err error
		}
		done := make(chan result, 1)
		called := time.Now()
		go func() {
			_, err := mgr.PreCloudInitIso(vmi, in)
			done <- result{time.Now(), err}
		}()
		var r *result
		grace := time.NewTimer(waitingGrace)
	waitLoop:
		for {
			select {
			case got := <-done:
				r = &got
				break waitLoop
			case l := <-lines:
				if strings.Contains(strings.ToLower(l), "wait") {
					break waitLoop
				}
			case <-grace.C:
				break waitLoop
			}
		}
		grace.Stop()
		w0 := time.Now()
		if err := podInfo.WritePodInfo(map[string]string{"app": "bench"}, ann); err != nil {
			return res, err
		}
		w1 := time.Now()
		if r != nil {
			if r.err != nil {
				return res, fmt.Errorf("round %d: PreCloudInitIso: %w", i, r.err)
			}
			res.ReturnedEarly++
			early = append(early, r.at.Sub(called))
		} else {
			select {
			case got := <-done:
				if got.err != nil {
					return res, fmt.Errorf("round %d: PreCloudInitIso: %w", i, got.err)
				}
				if got.at.Before(w0) {
					res.ReturnedEarly++
					early = append(early, got.at.Sub(called))
				} else {
					res.Waited++
					fromWrite = append(fromWrite, got.at.Sub(w0))
				}
			case <-time.After(time.Minute):
				return res, fmt.Errorf("round %d: PreCloudInitIso still waiting a minute after the swap", i)
			}
		}
		writes = append(writes, w1.Sub(w0))
	}
	res.FromWrite, res.Write, res.EarlyCall = Summarize(fromWrite), Summarize(writes), Summarize(early)
	return res, nil
}

func drain(lines <-chan string) {
	for {
		select {
		case <-lines:
		default:
			return
		}
	}
}

// CallPreCloudInitIso makes the calls of the Manager's PreCloudInitIso (manager.go: the VMI, a
// CloudInitNoCloudSource and the CloudInitData marshalled to JSON, a fresh connection, v1alpha3 with
// a 1 minute deadline, the result unmarshalled) against any socket: the Manager only calls sidecars
// that subscribed the hook point, and the peer did not, yet implements it as a pass-through.
func CallPreCloudInitIso(socket string, vmi *v1.VirtualMachineInstance, data *cloudinit.CloudInitData) (*cloudinit.CloudInitData, error) {
	vmiJSON, err := json.Marshal(vmi)
	if err != nil {
		return nil, fmt.Errorf("marshal VMI: %w", err)
	}
	sourceJSON, err := json.Marshal(v1.CloudInitNoCloudSource{UserData: data.UserData, NetworkData: data.NetworkData})
	if err != nil {
		return nil, fmt.Errorf("marshal CloudInitNoCloudSource: %w", err)
	}
	dataJSON, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("marshal CloudInitData: %w", err)
	}
	conn, err := grpcutil.DialSocketWithTimeout(socket, 1)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := hooksV1alpha3.NewCallbacksClient(conn).PreCloudInitIso(ctx, &hooksV1alpha3.PreCloudInitIsoParams{
		CloudInitData: dataJSON, CloudInitNoCloudSource: sourceJSON, Vmi: vmiJSON,
	})
	if err != nil {
		return nil, fmt.Errorf("PreCloudInitIso on %s: %w", socket, err)
	}
	var out *cloudinit.CloudInitData
	if err := json.Unmarshal(res.GetCloudInitData(), &out); err != nil {
		return nil, fmt.Errorf("PreCloudInitIso on %s: result: %w", socket, err)
	}
	if out == nil || out.UserData == "" {
		return nil, fmt.Errorf("PreCloudInitIso on %s: result has no user data", socket)
	}
	return out, nil
}
