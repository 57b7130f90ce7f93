package admission

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

// reviewOf is the AdmissionReview kube-apiserver sends for creating object (raw JSON) of kind.
func reviewOf(t *testing.T, kind metav1.GroupVersionKind, op admissionv1.Operation, object []byte) []byte {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("7f0c-uid"), Kind: kind, Operation: op, Namespace: "vm",
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object:   runtime.RawExtension{Raw: object},
		},
	})
	require.NoError(t, err)
	return body
}

func podJSON(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	data, err := json.Marshal(pod)
	require.NoError(t, err)
	return data
}

func TestReview_AnswersEachRequest(t *testing.T) {
	ours := launcherPod(sidecar("hook-sidecar-0", ourImage, hooksMount))
	tests := []struct {
		name        string
		body        func(*testing.T) []byte
		wantAllowed bool
		wantOps     int
		wantReason  string // in the refusal's message
	}{
		{"our launcher pod: patched", func(t *testing.T) []byte { return reviewOf(t, podKind, admissionv1.Create, podJSON(t, ours)) }, true, 2, ""},
		{"already mutated: allowed, no patch", func(t *testing.T) []byte {
			return reviewOf(t, podKind, admissionv1.Create, podJSON(t, mapResult(ours)))
		}, true, 0, ""},
		{"not ours: allowed, no patch", func(t *testing.T) []byte {
			return reviewOf(t, podKind, admissionv1.Create, podJSON(t, launcherPod()))
		}, true, 0, ""},
		{"members in another case are not the pod's (kube-apiserver and JSON pointers are case-sensitive)", func(t *testing.T) []byte {
			return reviewOf(t, podKind, admissionv1.Create, []byte(`{"apiVersion":"v1","kind":"Pod","Spec":{"containers":[{"name":"hook-sidecar-0","image":"sriov-udn-binding"}]}}`))
		}, true, 0, ""},
		{"an UPDATE: allowed, no patch", func(t *testing.T) []byte { return reviewOf(t, podKind, admissionv1.Update, podJSON(t, ours)) }, true, 0, ""},
		{"another kind", func(t *testing.T) []byte {
			return reviewOf(t, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, admissionv1.Create, []byte(`{}`))
		}, false, 0, `request 7f0c-uid is for kind "Deployment" (group "apps", version "v1"): this webhook mutates v1 Pods only`},
		{"a Pod request carrying a Service", func(t *testing.T) []byte {
			return reviewOf(t, podKind, admissionv1.Create, []byte(`{"apiVersion":"v1","kind":"Service","spec":{}}`))
		}, false, 0, `request 7f0c-uid: the object is apiVersion "v1" kind "Service", not a v1 Pod`},
		{"an object without apiVersion and kind", func(t *testing.T) []byte {
			return reviewOf(t, podKind, admissionv1.Create, []byte(`{"spec":{"containers":[]}}`))
		}, false, 0, `the object is apiVersion "" kind "", not a v1 Pod`},
		{"an object that does not decode as a Pod", func(t *testing.T) []byte {
			return reviewOf(t, podKind, admissionv1.Create, []byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"compute"}}`))
		}, false, 0, "request 7f0c-uid: decode the object as a v1 Pod: spec: containers: json: cannot unmarshal string"},
		{"no object", func(t *testing.T) []byte { return reviewOf(t, podKind, admissionv1.Create, nil) }, false, 0, "request 7f0c-uid (CREATE) has no object"},
		{"a subresource", func(t *testing.T) []byte {
			body := reviewOf(t, podKind, admissionv1.Create, podJSON(t, ours))
			return bytes.Replace(body, []byte(`"operation"`), []byte(`"subResource":"ephemeralcontainers","operation"`), 1)
		}, false, 0, `request 7f0c-uid is for subresource "ephemeralcontainers"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			review, out, err := defaultRule.Review(tc.body(t))
			require.NoError(t, err)
			require.NotNil(t, review.Response)
			assert.Equal(t, "admission.k8s.io/v1", review.APIVersion)
			assert.Equal(t, "AdmissionReview", review.Kind)
			assert.Equal(t, "7f0c-uid", review.Response.UID, "the request's uid is echoed")
			assert.Equal(t, tc.wantAllowed, review.Response.Allowed)
			assert.Equal(t, tc.wantAllowed, out.Allowed)
			assert.Equal(t, tc.wantOps, out.Ops)
			if tc.wantOps == 0 {
				assert.Nil(t, review.Response.Patch)
				assert.Nil(t, review.Response.PatchType)
			} else {
				require.NotNil(t, review.Response.PatchType)
				assert.Equal(t, string(admissionv1.PatchTypeJSONPatch), *review.Response.PatchType)
				var ops []PatchOp
				require.NoError(t, json.Unmarshal(review.Response.Patch, &ops))
				assert.Len(t, ops, tc.wantOps)
			}
			if tc.wantAllowed {
				assert.Nil(t, review.Response.Result)
				return
			}
			require.NotNil(t, review.Response.Result)
			assert.Equal(t, int32(http.StatusBadRequest), review.Response.Result.Code)
			assert.Contains(t, review.Response.Result.Message, "sriov-udn-binding pod-info webhook: ")
			assert.Contains(t, review.Response.Result.Message, tc.wantReason)
		})
	}
}

func TestReview_NoRequestToAnswer_IsAnError(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":        `<xml/>`,
		"v1beta1":         `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`,
		"another kind":    `{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}`,
		"no request":      `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		"no uid":          `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"version":"v1","kind":"Pod"}}}`,
		"a JSON array":    `[]`,
		"a wrong type":    `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`,
		"an empty body":   ``,
		"a response only": `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`,
	} {
		t.Run(name, func(t *testing.T) {
			review, _, err := defaultRule.Review([]byte(body))
			assert.ErrorIs(t, err, errNotAReview)
			assert.Nil(t, review)
		})
	}
}

func TestHandler_RefusesWhatIsNotAReviewAndLogsOneLinePerRequest(t *testing.T) {
	ours := launcherPod(sidecar("hook-sidecar-0", ourImage, hooksMount))
	ours.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": "SECRET-ANNOTATION-VALUE"}
	good := reviewOf(t, podKind, admissionv1.Create, podJSON(t, ours))
	tests := []struct {
		name        string
		method      string
		contentType string
		body        []byte
		wantStatus  int
		wantBody    string
		wantLog     string
	}{
		{"a review", http.MethodPost, "application/json", good, http.StatusOK, `"patchType":"JSONPatch"`, `"msg":"admission review","uid":"7f0c-uid","operation":"CREATE","namespace":"vm","pod":"virt-launcher-vm-","allowed":true,"patchOps":2`},
		{"a charset parameter", http.MethodPost, "application/json; charset=utf-8", good, http.StatusOK, `"allowed":true`, `"patchOps":2`},
		{"a refused request", http.MethodPost, "application/json", reviewOf(t, podKind, admissionv1.Create, []byte(`{}`)), http.StatusOK,
			`"allowed":false`, `"msg":"admission review refused"`},
		{"GET", http.MethodGet, "application/json", nil, http.StatusMethodNotAllowed, "method GET: only POST is served", `"status":405`},
		{"YAML", http.MethodPost, "application/yaml", good, http.StatusUnsupportedMediaType, "Content-Type application/yaml: want application/json", `"status":415`},
		{"no content type", http.MethodPost, "", good, http.StatusUnsupportedMediaType, "want application/json", `"status":415`},
		{"a body over the limit", http.MethodPost, "application/json", bytes.Repeat([]byte(" "), MaxRequestBytes+1), http.StatusRequestEntityTooLarge,
			"body over 3 MiB", `"status":413`},
		{"not a review", http.MethodPost, "application/json", []byte(`{"kind":"Pod"}`), http.StatusBadRequest,
			"sriov-udn-binding pod-info webhook: not an admission.k8s.io/v1 AdmissionReview request", `"status":400`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := NewHandler(slog.New(slog.NewJSONHandler(&logs, nil)), defaultRule)
			req := httptest.NewRequest(tc.method, "/mutate", bytes.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body, err := io.ReadAll(rec.Result().Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, rec.Code, "%s", body)
			assert.Contains(t, string(body), tc.wantBody)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			require.Len(t, lines, 1, "one log line per request: %s", logs.String())
			assert.Contains(t, lines[0], tc.wantLog)
			assert.NotContains(t, lines[0], "SECRET-ANNOTATION-VALUE", "no annotation in the log")
			assert.NotContains(t, lines[0], "hook-sidecar", "no pod spec in the log")
			if tc.wantStatus == http.StatusOK {
				assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			}
		})
	}
}
