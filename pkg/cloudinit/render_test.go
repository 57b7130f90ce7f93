package cloudinit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRender_MatchesGoldenFiles(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			v1, err := RenderNetworkConfigV1(tc.ifaces)
			require.NoError(t, err)
			assertGolden(t, goldenPath("render", tc.name+".v1.yaml"), v1)

			nd, err := renderNetworkDataJSON(tc.ifaces)
			require.NoError(t, err)
			assertGolden(t, goldenPath("render", tc.name+".network_data.json"), nd)

			v2, err := renderNetworkConfigV2(tc.ifaces)
			if tc.errV2 != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errV2)
				assert.Contains(t, err.Error(), tc.ifaces[0].Name, "the error names the interface")
				return
			}
			require.NoError(t, err)
			assertGolden(t, goldenPath("render", tc.name+".v2.yaml"), v2)
		})
	}
}
