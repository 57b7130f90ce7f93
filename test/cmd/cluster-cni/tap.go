package main

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// qemuID is the uid and gid of qemu in virt-launcher (KubeVirt's non-root VMIs run as 107).
const qemuID = 107

// createTap makes the persistent TAP device standing in for a VF in the netns at nsPath, owned by
// uid/gid 107, with mac when it is not empty and mtu when it is not 0 (what the SR-IOV operator's policy sets on
// a VF), and returns its MAC. The tun ioctl makes the device in the
// netns of the calling thread, so the work runs on a thread of its own that enters the netns and is
// discarded afterwards (the goroutine exits locked).
func createTap(nsPath, name, mac string, mtu int) (string, error) {
	type res struct {
		mac string
		err error
	}
	done := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		mac, err := createTapHere(nsPath, name, mac, mtu)
		done <- res{mac, err}
	}()
	r := <-done
	if r.err != nil {
		return "", withCode(codeDevice, fmt.Errorf("create TAP %s in netns %s: %w", name, nsPath, r.err))
	}
	return r.mac, nil
}

func createTapHere(nsPath, name, mac string, mtu int) (string, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return "", fmt.Errorf("open netns: %w", err)
	}
	defer func() { _ = ns.Close() }()
	if err := netns.Set(ns); err != nil {
		return "", fmt.Errorf("enter netns: %w", err)
	}
	tap := &netlink.Tuntap{
		LinkAttrs: netlink.LinkAttrs{Name: name},
		Mode:      netlink.TUNTAP_MODE_TAP,
		Flags:     netlink.TUNTAP_NO_PI | netlink.TUNTAP_ONE_QUEUE | netlink.TUNTAP_VNET_HDR,
		Owner:     qemuID,
		Group:     qemuID,
	}
	if err := netlink.LinkAdd(tap); err != nil {
		return "", fmt.Errorf("add: %w", err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("look up after add: %w", err)
	}
	if mac != "" {
		m, err := checkMAC(mac)
		if err != nil {
			return "", err
		}
		if err := netlink.LinkSetHardwareAddr(link, m.HardwareAddr()); err != nil {
			return "", fmt.Errorf("set mac %s: %w", mac, err)
		}
		if link, err = netlink.LinkByName(name); err != nil {
			return "", fmt.Errorf("look up after setting mac: %w", err)
		}
	}
	if mtu != 0 {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return "", fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	return link.Attrs().HardwareAddr.String(), nil
}

// deleteTap removes the TAP; a netns or device already gone is success.
func deleteTap(nsPath, name string) error {
	if nsPath == "" {
		return nil
	}
	ns, err := netns.GetFromPath(nsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return withCode(codeDevice, fmt.Errorf("delete TAP %s: open netns %s: %w", name, nsPath, err))
	}
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return withCode(codeDevice, fmt.Errorf("delete TAP %s: netlink in netns %s: %w", name, nsPath, err))
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return withCode(codeDevice, fmt.Errorf("delete TAP %s in netns %s: look up: %w", name, nsPath, err))
	}
	if err := h.LinkDel(link); err != nil {
		return withCode(codeDevice, fmt.Errorf("delete TAP %s in netns %s: %w", name, nsPath, err))
	}
	return nil
}

// tapIn returns the TAP named name in the netns (nil when absent).
func tapIn(nsPath, name string) (*netlink.Tuntap, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in netns %s: %w", nsPath, err)
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s in netns %s: %w", name, nsPath, err)
	}
	tap, ok := link.(*netlink.Tuntap)
	if !ok {
		return nil, fmt.Errorf("%s in netns %s is a %s, not a TAP", name, nsPath, link.Type())
	}
	return tap, nil
}

// checkMAC parses a requested MAC: a unicast, non-zero, 48-bit address.
func checkMAC(mac string) (netval.MAC, error) {
	m, err := netval.ParseMAC(mac)
	if err != nil {
		return m, fmt.Errorf("mac: %w", err)
	}
	if m.IsZero() {
		return m, fmt.Errorf("mac %s is all zero", m)
	}
	if err := m.CheckUnicast(); err != nil {
		return m, fmt.Errorf("mac: %w", err)
	}
	return m, nil
}
