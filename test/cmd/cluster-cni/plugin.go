package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// codePodNetworks is this plugin's error code for a pod whose networks cannot be attached (bad selection
// annotation, bad NAD config).
const codePodNetworks = 103

// Plugin runs one CNI command with its config, environment and (for ADD) the apiserver.
type Plugin struct {
	Conf    *Config
	Env     Env
	Cluster Cluster
}

// Add sets up the pod network and the pod's secondary networks, patches the annotations and returns the
// CNI result: the pod network's, as Multus returns its cluster network's.
func (p *Plugin) Add(ctx context.Context) ([]byte, error) {
	if err := p.Env.check(true); err != nil {
		return nil, err
	}
	ns, name, err := p.Env.podRef()
	if err != nil {
		return nil, err
	}
	pod, err := p.Cluster.Pod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	plans, err := p.plan(ctx, pod.Namespace, pod.Annotations[NetworksAnnotation])
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	// A second ADD without DEL (a runtime retrying): undo the first one before doing it again.
	if old, err := loadState(p.Conf, p.Env.ContainerID, p.Env.IfName); err != nil {
		return nil, err
	} else if old != nil {
		if err := p.teardown(ctx, old); err != nil {
			return nil, fmt.Errorf("undo the previous ADD of container %s: %w", p.Env.ContainerID, err)
		}
	}
	st := &State{ContainerID: p.Env.ContainerID, IfName: p.Env.IfName, Netns: p.Env.Netns, PodNamespace: ns, PodName: name}
	out, err := p.setUp(ctx, st, plans, pod.Namespace, pod.Name)
	if err == nil {
		return out, nil
	}
	if rerr := p.teardown(ctx, st); rerr != nil {
		err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
	}
	return nil, err
}

// plan reads and checks every NAD of the selection annotation: nothing is set up for a pod whose
// networks cannot all be attached.
func (p *Plugin) plan(ctx context.Context, podNamespace, annotation string) ([]Attachment, error) {
	sels, err := parseNetworkSelections(annotation, podNamespace)
	if err != nil {
		return nil, withCode(codePodNetworks, err)
	}
	var plans []Attachment
	seen := map[string]string{p.Env.IfName: "the pod network"}
	for i, sel := range sels {
		key := sel.Namespace + "/" + sel.Name
		nad, err := p.Cluster.NAD(ctx, sel.Namespace, sel.Name)
		if err != nil {
			return nil, fmt.Errorf("network %d (%s): %w", i, key, err)
		}
		cfg, err := parseNADConfig(sel.Namespace, sel.Name, nad.Spec.Config)
		if err != nil {
			return nil, withCode(codePodNetworks, fmt.Errorf("network %d: %w", i, err))
		}
		iface := sel.InterfaceRequest
		if iface == "" {
			iface = fmt.Sprintf("net%d", i+1) // Multus' name for an interface the selection does not name
		}
		if other, dup := seen[iface]; dup {
			return nil, withCode(codePodNetworks, fmt.Errorf("network %d (%s): interface %s is also %s", i, key, iface, other))
		}
		seen[iface] = key
		if sel.MacRequest != "" {
			if _, err := checkMAC(sel.MacRequest); err != nil {
				return nil, withCode(codePodNetworks, fmt.Errorf("network %d (%s): %w", i, key, err))
			}
		}
		if cfg.Type == typeSRIOV && cfg.IPAM != nil {
			if _, _, err := ipamConf(p.Conf, cfg); err != nil {
				return nil, withCode(codePodNetworks, fmt.Errorf("network %d (%s): %w", i, key, err))
			}
		}
		plans = append(plans, Attachment{Selection: sel, NAD: cfg, PodIface: iface})
	}
	return plans, nil
}

// setUp does the work of ADD, saving the state after each step.
func (p *Plugin) setUp(ctx context.Context, st *State, plans []Attachment, podNS, podName string) ([]byte, error) {
	conf, err := bridgeConf(p.Conf)
	if err != nil {
		return nil, err
	}
	st.Default = &DelegateState{Plugin: "bridge", IfName: p.Env.IfName, Conf: conf}
	if err := saveState(p.Conf, st); err != nil {
		return nil, err
	}
	out, err := delegate(ctx, p.Conf, p.Env, "ADD", "bridge", p.Env.IfName, conf)
	if err != nil {
		return nil, err
	}
	st.Default.Result = out
	if err := saveState(p.Conf, st); err != nil {
		return nil, err
	}
	defResult, err := parseResult("bridge", out)
	if err != nil {
		return nil, err
	}
	var atts []Attachment
	for _, a := range plans {
		if err := p.attach(ctx, st, &a); err != nil {
			return nil, err
		}
		atts = append(atts, a)
	}
	pod, err := p.Cluster.Pod(ctx, podNS, podName)
	if err != nil {
		return nil, err
	}
	ann, err := BuildAnnotations(AnnotationInput{
		Pod: pod, DefaultNetwork: p.Conf.Name, PodIfName: p.Env.IfName, PodNetwork: p.Conf.PodNetwork,
		Default: defResult, Attachments: atts,
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", podNS, podName, err)
	}
	if err := p.Cluster.PatchPodAnnotations(ctx, podNS, podName, ann); err != nil {
		return nil, err
	}
	return out, nil
}

// attach sets up one secondary network in the pod's netns, recording each step in st, and fills in a's MAC
// and (with IPAM) its result: a sriov network gets a TAP standing in for the VF and its IPAM's addresses, a
// bridge network a veth from the bridge plugin, a `none` network nothing.
func (p *Plugin) attach(ctx context.Context, st *State, a *Attachment) error {
	key := a.Selection.Namespace + "/" + a.Selection.Name
	switch a.NAD.Type {
	case typeBridge:
		conf, err := secondaryBridgeConf(a.NAD)
		if err != nil {
			return err
		}
		st.Attachments = append(st.Attachments, AttachmentState{Network: key, PodIface: a.PodIface,
			Link: &DelegateState{Plugin: "bridge", IfName: a.PodIface, Conf: conf}})
		if err := saveState(p.Conf, st); err != nil {
			return err
		}
		out, err := delegate(ctx, p.Conf, p.Env, "ADD", "bridge", a.PodIface, conf)
		if err != nil {
			return fmt.Errorf("network %s: %w", key, err)
		}
		last := &st.Attachments[len(st.Attachments)-1]
		last.Link.Result = out
		if err := saveState(p.Conf, st); err != nil {
			return err
		}
		if a.MAC, err = sandboxMAC(out, a.PodIface); err != nil {
			return fmt.Errorf("network %s: %w", key, err)
		}
	case typeSRIOV:
		as := AttachmentState{Network: key, PodIface: a.PodIface, Tap: tapName(a.PodIface)}
		st.Attachments = append(st.Attachments, as)
		if err := saveState(p.Conf, st); err != nil {
			return err
		}
		var err error
		if a.MAC, err = createTap(p.Env.Netns, as.Tap, a.Selection.MacRequest, a.NAD.MTU); err != nil {
			return fmt.Errorf("network %s: %w", key, err)
		}
		if a.NAD.IPAM == nil {
			return nil
		}
		conf, plugin, err := ipamConf(p.Conf, a.NAD)
		if err != nil {
			return withCode(codePodNetworks, fmt.Errorf("network %s: %w", key, err))
		}
		last := &st.Attachments[len(st.Attachments)-1]
		last.IPAM = &DelegateState{Plugin: plugin, IfName: a.PodIface, Conf: conf}
		if err := saveState(p.Conf, st); err != nil {
			return err
		}
		ipamOut, err := delegate(ctx, p.Conf, p.Env, "ADD", plugin, a.PodIface, conf)
		if err != nil {
			return fmt.Errorf("network %s: %w", key, err)
		}
		last.IPAM.Result = ipamOut
		if err := saveState(p.Conf, st); err != nil {
			return err
		}
		if a.Result, err = parseResult(plugin, ipamOut); err != nil {
			return fmt.Errorf("network %s: %w", key, err)
		}
	}
	return nil
}

// sandboxMAC is the MAC of the interface ifname in the pod's netns, from a bridge plugin result.
func sandboxMAC(out []byte, ifname string) (string, error) {
	res, err := parseResult("bridge", out)
	if err != nil {
		return "", err
	}
	for _, ifc := range res.Interfaces {
		if ifc.Sandbox != "" && ifc.Name == ifname {
			return ifc.Mac, nil
		}
	}
	return "", fmt.Errorf("bridge result has no sandbox interface %s", ifname)
}

// Del undoes what ADD recorded; what is already gone is success. Without a record (ADD never ran, or a
// DEL already did) it still asks bridge and host-local to release the pod network, which they do
// idempotently.
func (p *Plugin) Del(ctx context.Context) error {
	if err := p.Env.check(false); err != nil {
		return err
	}
	st, err := loadState(p.Conf, p.Env.ContainerID, p.Env.IfName)
	if err != nil {
		return err
	}
	if st == nil {
		conf, err := bridgeConf(p.Conf)
		if err != nil {
			return err
		}
		st = &State{ContainerID: p.Env.ContainerID, IfName: p.Env.IfName,
			Default: &DelegateState{Plugin: "bridge", IfName: p.Env.IfName, Conf: conf}}
	}
	return p.teardown(ctx, st)
}

// teardown releases the secondary networks (newest first), then the pod network, and removes the state
// once everything succeeded. The netns is the one of this invocation: DEL may get none, when it is gone.
// A delegate whose ADD never returned a result still gets its DEL, but its failure does not count: a config
// the delegate refused on ADD it refuses on DEL too, and the pod must not be stuck on it.
func (p *Plugin) teardown(ctx context.Context, st *State) error {
	var errs []error
	for _, a := range slices.Backward(st.Attachments) {
		if a.IPAM != nil {
			if _, err := delegate(ctx, p.Conf, p.Env, "DEL", a.IPAM.Plugin, a.IPAM.IfName, a.IPAM.Conf); err != nil && len(a.IPAM.Result) > 0 {
				errs = append(errs, fmt.Errorf("network %s: %w", a.Network, err))
			}
		}
		if a.Tap != "" {
			if err := deleteTap(p.Env.Netns, a.Tap); err != nil {
				errs = append(errs, fmt.Errorf("network %s: %w", a.Network, err))
			}
		}
		if a.Link != nil {
			if _, err := delegate(ctx, p.Conf, p.Env, "DEL", a.Link.Plugin, a.Link.IfName, a.Link.Conf); err != nil && len(a.Link.Result) > 0 {
				errs = append(errs, fmt.Errorf("network %s: %w", a.Network, err))
			}
		}
	}
	if st.Default != nil {
		if _, err := delegate(ctx, p.Conf, p.Env, "DEL", st.Default.Plugin, st.Default.IfName, st.Default.Conf); err != nil && len(st.Default.Result) > 0 {
			errs = append(errs, fmt.Errorf("pod network: %w", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return removeState(p.Conf, st.ContainerID, st.IfName)
}

// Check verifies what ADD made still exists (spec: CHECK): the pod network through bridge's own CHECK
// with the runtime's prevResult, each TAP (a TAP owned by 107) and each allocation through host-local's
// CHECK.
func (p *Plugin) Check(ctx context.Context) error {
	if err := p.Env.check(true); err != nil {
		return err
	}
	if len(p.Conf.PrevResult) == 0 {
		return withCode(codeInvalidConfig, errors.New("network config: CHECK needs prevResult"))
	}
	st, err := loadState(p.Conf, p.Env.ContainerID, p.Env.IfName)
	if err != nil {
		return err
	}
	if st == nil || st.Default == nil || len(st.Default.Result) == 0 {
		return withCode(codeUnknownContainer, fmt.Errorf("container %s interface %s: no ADD recorded", p.Env.ContainerID, p.Env.IfName))
	}
	conf, err := withPrevResult(st.Default.Conf, p.Conf.PrevResult)
	if err != nil {
		return err
	}
	if _, err := delegate(ctx, p.Conf, p.Env, "CHECK", st.Default.Plugin, st.Default.IfName, conf); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	for _, a := range st.Attachments {
		if a.Tap != "" {
			tap, err := tapIn(p.Env.Netns, a.Tap)
			if err != nil {
				return withCode(codeDevice, fmt.Errorf("network %s: %w", a.Network, err))
			}
			if tap == nil {
				return withCode(codeDevice, fmt.Errorf("network %s: TAP %s is gone from netns %s", a.Network, a.Tap, p.Env.Netns))
			}
			if tap.Owner != qemuID || tap.Group != qemuID {
				return withCode(codeDevice, fmt.Errorf("network %s: TAP %s is owned by %d:%d, not %d:%d", a.Network, a.Tap, tap.Owner, tap.Group, qemuID, qemuID))
			}
		}
		if a.Link != nil && len(a.Link.Result) > 0 {
			conf, err := withPrevResult(a.Link.Conf, a.Link.Result)
			if err != nil {
				return err
			}
			if _, err := delegate(ctx, p.Conf, p.Env, "CHECK", a.Link.Plugin, a.Link.IfName, conf); err != nil {
				return fmt.Errorf("network %s: %w", a.Network, err)
			}
		}
		if a.IPAM != nil && len(a.IPAM.Result) > 0 {
			conf, err := withPrevResult(a.IPAM.Conf, a.IPAM.Result)
			if err != nil {
				return err
			}
			if _, err := delegate(ctx, p.Conf, p.Env, "CHECK", a.IPAM.Plugin, a.IPAM.IfName, conf); err != nil {
				return fmt.Errorf("network %s: %w", a.Network, err)
			}
		}
	}
	return nil
}

// bridgeConf is the delegate config of the pod network: the Debian bridge plugin, the node's bridge as
// the gateway and default route of both families, host-local IPAM with one range per family
// (https://www.cni.dev/plugins/current/main/bridge/, .../ipam/host-local/).
func bridgeConf(c *Config) ([]byte, error) {
	conf := map[string]any{
		"cniVersion":       cniVersion,
		"name":             c.Name,
		"type":             "bridge",
		"bridge":           c.PodNetwork.Bridge,
		"isGateway":        true,
		"isDefaultGateway": true,
		"hairpinMode":      true,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": hostLocalDir(c),
			"ranges": [][]map[string]string{
				{{"subnet": c.PodNetwork.SubnetV4}},
				{{"subnet": c.PodNetwork.SubnetV6}},
			},
		},
	}
	b, err := json.Marshal(conf)
	if err != nil {
		return nil, withCode(codeInternal, fmt.Errorf("marshal bridge config: %w", err))
	}
	return b, nil
}

// secondaryBridgeConf is the delegate config of a bridge network: the Debian bridge plugin puts a veth named
// as Multus names the pod's interface on the NAD's bridge, with the NAD's MTU and no addresses.
func secondaryBridgeConf(nad NADConfig) ([]byte, error) {
	conf := map[string]any{"cniVersion": cniVersion, "name": nad.Name, "type": "bridge", "bridge": nad.Bridge, "ipam": map[string]any{}}
	if nad.MTU != 0 {
		conf["mtu"] = nad.MTU
	}
	b, err := json.Marshal(conf)
	if err != nil {
		return nil, withCode(codeInternal, fmt.Errorf("marshal bridge config of %s: %w", netval.Quote(nad.Name), err))
	}
	return b, nil
}

// ipamConf is the delegate config of a secondary network's IPAM: the NAD's ipam block, with host-local
// keeping its leases in this plugin's dataDir; it returns the IPAM plugin's name too.
func ipamConf(c *Config, nad NADConfig) ([]byte, string, error) {
	var ipam map[string]any
	if err := json.Unmarshal(nad.IPAM, &ipam); err != nil {
		return nil, "", fmt.Errorf("ipam of %s: %w", netval.Quote(nad.Name), err)
	}
	plugin, _ := ipam["type"].(string)
	switch plugin {
	case "host-local":
		ipam["dataDir"] = hostLocalDir(c)
	case "static":
	default:
		return nil, "", fmt.Errorf("ipam type %s of %s is not host-local or static", netval.Quote(plugin), netval.Quote(nad.Name))
	}
	b, err := json.Marshal(map[string]any{"cniVersion": cniVersion, "name": nad.Name, "ipam": ipam})
	if err != nil {
		return nil, "", fmt.Errorf("marshal ipam config of %s: %w", netval.Quote(nad.Name), err)
	}
	return b, plugin, nil
}

// withPrevResult adds prevResult to a delegate config, for CHECK.
func withPrevResult(conf, prev json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(conf, &m); err != nil {
		return nil, withCode(codeIOError, fmt.Errorf("recorded delegate config: %w", err))
	}
	m["prevResult"] = prev
	b, err := json.Marshal(m)
	if err != nil {
		return nil, withCode(codeInternal, fmt.Errorf("marshal delegate config: %w", err))
	}
	return b, nil
}
