package cloudinit

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// splitObject answers as json.Unmarshal into map[string]json.RawMessage does, on any input.
func FuzzSplitObject(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}],"d":"x\"y\\","e":null,"f":true} `, `null`, `[]`, `"s"`, `{"a":1,"a":2}`,
		`{"UserData":"<\u003c>","k\u00e9y":{"x":[[]]}}`, `{"a":1`, `{"a" 1}`, `{"a":-1.5e3,"b":{}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := splitObject([]byte(in))
		if wantErr != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, len(want), len(got), "%q", in)
		for k, v := range want {
			require.Equal(t, string(v), string(got[k]), "key %q of %q", k, in)
		}
	})
}
