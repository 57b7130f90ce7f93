package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// State is what ADD did for one container and interface, saved in dataDir after each step so that DEL (or
// ADD's own rollback) undoes exactly that, even after a crash half-way.
type State struct {
	ContainerID  string            `json:"containerID"`
	IfName       string            `json:"ifName"`
	Netns        string            `json:"netns"`
	PodNamespace string            `json:"podNamespace"`
	PodName      string            `json:"podName"`
	Default      *DelegateState    `json:"default,omitempty"`
	Attachments  []AttachmentState `json:"attachments,omitempty"`
}

// DelegateState is one delegated plugin call: the plugin, the interface it was called for, the config it
// got and the result it gave (empty until it succeeded).
type DelegateState struct {
	Plugin string          `json:"plugin"`
	IfName string          `json:"ifName"`
	Conf   json.RawMessage `json:"conf"`
	Result json.RawMessage `json:"result,omitempty"`
}

// AttachmentState is one secondary network: its TAP ("" when none), the delegate call that made its link (a
// bridge network's veth; nil when none) and its IPAM call (nil when none).
type AttachmentState struct {
	Network  string         `json:"network"`
	PodIface string         `json:"podIface"`
	Tap      string         `json:"tap,omitempty"`
	Link     *DelegateState `json:"link,omitempty"`
	IPAM     *DelegateState `json:"ipam,omitempty"`
}

func stateDir(c *Config) string     { return filepath.Join(c.DataDir, "state") }
func hostLocalDir(c *Config) string { return filepath.Join(c.DataDir, "host-local") }

func statePath(c *Config, containerID, ifname string) string {
	return filepath.Join(stateDir(c), containerID+"_"+ifname+".json")
}

// saveState writes the state atomically (temporary file, then rename).
func saveState(c *Config, st *State) error {
	if err := os.MkdirAll(stateDir(c), 0o700); err != nil {
		return withCode(codeIOError, fmt.Errorf("state dir: %w", err))
	}
	b, err := json.Marshal(st)
	if err != nil {
		return withCode(codeIOError, fmt.Errorf("marshal state of container %s: %w", st.ContainerID, err))
	}
	path := statePath(c, st.ContainerID, st.IfName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return withCode(codeIOError, fmt.Errorf("write state: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return withCode(codeIOError, fmt.Errorf("write state: %w", err))
	}
	return nil
}

// loadState reads the state; (nil, nil) when there is none.
func loadState(c *Config, containerID, ifname string) (*State, error) {
	path := statePath(c, containerID, ifname)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, withCode(codeIOError, fmt.Errorf("read state: %w", err))
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, withCode(codeIOError, fmt.Errorf("state file %s: %w", path, err))
	}
	return &st, nil
}

func removeState(c *Config, containerID, ifname string) error {
	err := os.Remove(statePath(c, containerID, ifname))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return withCode(codeIOError, fmt.Errorf("remove state: %w", err))
	}
	return nil
}
