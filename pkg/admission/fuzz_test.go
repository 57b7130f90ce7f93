package admission

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// FuzzReview: whatever the body, Review never panics; it answers with the request's uid or returns an error;
// a patch applies to the request's object, leaves a pod the policy's rule finds nothing more to add to, and
// touches only volumes and our containers' mounts. The seed corpus is testdata/fuzz/FuzzReview.
func FuzzReview(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		review, out, err := defaultRule.Review(body)
		if err != nil {
			assert.ErrorIs(t, err, errNotAReview)
			return
		}
		var in AdmissionReview
		require.NoError(t, json.Unmarshal(body, &in), "Review answered a body that does not decode")
		require.NotNil(t, review.Response)
		assert.Equal(t, in.Request.UID, review.Response.UID)
		assert.Equal(t, out.Allowed, review.Response.Allowed)
		if !review.Response.Allowed {
			assert.NotEmpty(t, out.Reason)
			assert.Nil(t, review.Response.Patch)
			return
		}
		if review.Response.Patch == nil {
			return
		}
		doc, err := applyAdds(in.Request.Object, review.Response.Patch)
		require.NoError(t, err, "patch %s", review.Response.Patch)
		var again Pod
		require.NoError(t, json.Unmarshal(doc, &again))
		assert.Nil(t, defaultRule.PodInfoPatch(&again), "a reinvocation adds nothing")
		// Against the policy's result, where k8s.io/api decodes the pod (the webhook reads fewer fields).
		var before, after corev1.Pod
		if json.Unmarshal(in.Request.Object, &before) == nil {
			require.NoError(t, json.Unmarshal(doc, &after))
			assert.Equal(t, mapResult(&before), &after, "the patched pod against the policy's result")
		}
	})
}
