package guest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// matrixTable is the boot test's result, image x scenario, printed at its end with the cloud-init
// version each guest reported.
type matrixTable struct {
	mu        sync.Mutex
	images    []string
	scenarios []string
	versions  map[string]string
	results   map[[2]string]bool // image, scenario -> passed
}

func newMatrixTable(images []GuestImage, scenarios []scenario) *matrixTable {
	m := &matrixTable{versions: map[string]string{}, results: map[[2]string]bool{}}
	for _, g := range images {
		m.images = append(m.images, g.Name)
	}
	for _, sc := range scenarios {
		m.scenarios = append(m.scenarios, sc.name)
	}
	return m
}

func (m *matrixTable) version(image, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v == "" {
		v = "?"
	}
	m.versions[image] = v
}

func (m *matrixTable) result(image, scenario string, passed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[[2]string{image, scenario}] = passed
}

// String prints one row per scenario and one column per image: pass, FAIL, or "-" (not run there).
func (m *matrixTable) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	width := len("scenario")
	for _, sc := range m.scenarios {
		width = max(width, len(sc))
	}
	var b strings.Builder
	cols := make([]string, len(m.images))
	for i, img := range m.images {
		v := m.versions[img]
		if v == "" {
			v = "not booted"
		}
		cols[i] = fmt.Sprintf("%s (cloud-init %s)", img, v)
	}
	fmt.Fprintf(&b, "%-*s", width, "scenario")
	for _, c := range cols {
		fmt.Fprintf(&b, " | %s", c)
	}
	b.WriteByte('\n')
	passed, failed := 0, 0
	for _, sc := range m.scenarios {
		fmt.Fprintf(&b, "%-*s", width, sc)
		for i, img := range m.images {
			cell := "-"
			if ok, ran := m.results[[2]string{img, sc}]; ran {
				cell = "FAIL"
				if ok {
					cell = "pass"
				}
				if ok {
					passed++
				} else {
					failed++
				}
			}
			fmt.Fprintf(&b, " | %-*s", len(cols[i]), cell)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d passed, %d failed, - = not run on that image", passed, failed)
	return b.String()
}

func TestMatrixTable_ShowsPassFailAndNotRunPerImageWithTheGuestsCloudInitVersion(t *testing.T) {
	m := newMatrixTable([]GuestImage{{Name: "old"}, {Name: "new"}}, []scenario{{name: "A"}, {name: "Bee"}})
	m.version("old", "22.4.2")
	m.result("old", "A", true)
	m.result("old", "Bee", false)
	m.result("new", "A", true)
	lines := strings.Split(m.String(), "\n")
	assert.Equal(t, []string{
		"scenario | old (cloud-init 22.4.2) | new (cloud-init not booted)",
		"A        | pass                    | pass                       ",
		"Bee      | FAIL                    | -                          ",
		"2 passed, 1 failed, - = not run on that image",
	}, lines)
}

func TestScenarioRunsOn_FullMatrixOnEveryImage_SmokeOnTheFloorOnly(t *testing.T) {
	tests := []struct {
		sc                  scenario
		floor, smoke, wants bool
	}{
		{scenario{}, true, false, true},
		{scenario{}, false, false, false},
		{scenario{matrix: true}, false, false, true},
		{scenario{matrix: true}, true, true, false},
		{scenario{smoke: true}, true, true, true},
		{scenario{smoke: true, matrix: true}, false, true, false},
	}
	for _, tc := range tests {
		assert.Equalf(t, tc.wants, tc.sc.runsOn(tc.floor, tc.smoke), "%+v floor=%v smoke=%v", tc.sc, tc.floor, tc.smoke)
	}
}

func TestImageMatrix_FloorFirstThenTrixieWithNetplanAndNetworkManager(t *testing.T) {
	images := ImageMatrix()
	assert.Equal(t, DefaultImageSpec().Key(), images[0].Spec.Key(), "the floor image is the one every scenario runs on")
	keys := map[string]bool{}
	for _, g := range images {
		keys[g.Spec.Key()] = true
	}
	assert.Len(t, keys, len(images), "each image its own cache entry")
	nm := images[len(images)-1]
	assert.True(t, nm.NetworkManager)
	assert.Contains(t, nm.Spec.Packages, "network-manager")
	assert.NotContains(t, nm.Spec.Packages, "netplan.io", "cloud-init must render NM keyfiles itself, not through netplan")
	assert.Contains(t, nm.Spec.CloudCfg, "renderers: [ network-manager ]")
}
