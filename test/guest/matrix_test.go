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
	results   map[[2]string]outcome // image, scenario -> how it ended
}

// outcome is how one scenario ended on one image, as the table prints it.
type outcome string

const (
	outcomePass outcome = "pass"
	outcomeFail outcome = "FAIL"
	// outcomeSkip: the scenario skipped (saying why in the log); the table must not count it as passed.
	outcomeSkip outcome = "skip"
)

// outcomeOf reads how t ended; called from t's Cleanup.
func outcomeOf(t testing.TB) outcome {
	switch {
	case t.Failed():
		return outcomeFail
	case t.Skipped():
		return outcomeSkip
	}
	return outcomePass
}

func newMatrixTable(images []GuestImage, scenarios []scenario) *matrixTable {
	m := &matrixTable{versions: map[string]string{}, results: map[[2]string]outcome{}}
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

func (m *matrixTable) result(image, scenario string, o outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[[2]string{image, scenario}] = o
}

// String prints one row per scenario and one column per image: pass, FAIL, skip, or "-" (not run there).
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
	count := map[outcome]int{}
	for _, sc := range m.scenarios {
		fmt.Fprintf(&b, "%-*s", width, sc)
		for i, img := range m.images {
			cell := "-"
			if o, ran := m.results[[2]string{img, sc}]; ran {
				cell = string(o)
				count[o]++
			}
			fmt.Fprintf(&b, " | %-*s", len(cols[i]), cell)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped, - = not run on that image",
		count[outcomePass], count[outcomeFail], count[outcomeSkip])
	return b.String()
}

func TestMatrixTable_ShowsPassFailSkipAndNotRunPerImageWithTheGuestsCloudInitVersion(t *testing.T) {
	m := newMatrixTable([]GuestImage{{Name: "old"}, {Name: "new"}}, []scenario{{name: "A"}, {name: "Bee"}, {name: "C"}})
	m.version("old", "22.4.2")
	m.result("old", "A", outcomePass)
	m.result("old", "Bee", outcomeFail)
	m.result("new", "A", outcomePass)
	m.result("new", "C", outcomeSkip)
	lines := strings.Split(m.String(), "\n")
	assert.Equal(t, []string{
		"scenario | old (cloud-init 22.4.2) | new (cloud-init not booted)",
		"A        | pass                    | pass                       ",
		"Bee      | FAIL                    | -                          ",
		"C        | -                       | skip                       ",
		"2 passed, 1 failed, 1 skipped, - = not run on that image",
	}, lines)
}

// TestOutcomeOf_ReadsFailedBeforeSkipped runs real subtests: a skip must not read as a pass.
func TestOutcomeOf_ReadsFailedBeforeSkipped(t *testing.T) {
	got := map[string]outcome{}
	var mu sync.Mutex
	for name, body := range map[string]func(t *testing.T){
		"passes": func(*testing.T) {},
		"skips":  func(t *testing.T) { t.Skip("skipping to test outcomeOf") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { mu.Lock(); got[name] = outcomeOf(t); mu.Unlock() })
			body(t)
		})
	}
	assert.Equal(t, map[string]outcome{"passes": outcomePass, "skips": outcomeSkip}, got)
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
		// test/cluster boots it on the floor image: the full matrix leaves that cell out, the smoke run keeps it.
		{scenario{cluster: true, matrix: true, smoke: true}, true, false, false},
		{scenario{cluster: true, matrix: true, smoke: true}, false, false, true},
		{scenario{cluster: true, matrix: true, smoke: true}, true, true, true},
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
