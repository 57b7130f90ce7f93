package admission

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// MaxRequestBytes bounds an AdmissionReview body. kube-apiserver refuses request bodies over 3 MB and etcd
// values over 1.5 MiB, and a pod's review is the pod plus a few hundred bytes of request metadata.
const MaxRequestBytes = 3 << 20

// Handler serves Review over HTTP: POST, Content-Type application/json, at most MaxRequestBytes. It logs one
// line per request: the request's uid, operation, namespace, pod name and what was decided.
type Handler struct {
	log  *slog.Logger
	rule Rule
}

// NewHandler returns a Handler finding our sidecars by rule and logging to log.
func NewHandler(log *slog.Logger, rule Rule) *Handler {
	return &Handler{log: log, rule: rule}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		h.refuse(w, http.StatusMethodNotAllowed, "method "+r.Method+": only POST is served", start)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		h.refuse(w, http.StatusUnsupportedMediaType, "Content-Type "+r.Header.Get("Content-Type")+": want application/json", start)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			h.refuse(w, http.StatusRequestEntityTooLarge, "body over "+humanBytes(mbe.Limit)+": no pod's review is that large", start)
			return
		}
		h.refuse(w, http.StatusBadRequest, "read the body: "+err.Error(), start)
		return
	}
	review, out, err := h.rule.Review(body)
	if err != nil {
		h.refuse(w, http.StatusBadRequest, err.Error(), start)
		return
	}
	data, err := json.Marshal(review)
	if err != nil {
		h.refuse(w, http.StatusInternalServerError, "encode the response to request "+out.UID+": "+err.Error(), start)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(data); err != nil {
		h.log.Warn("admission review: response not written", "uid", out.UID, "error", err)
		return
	}
	attrs := []any{"uid", out.UID, "operation", out.Operation, "namespace", out.Namespace, "pod", out.Pod,
		"allowed", out.Allowed, "patchOps", out.Ops, "duration", time.Since(start)}
	if !out.Allowed {
		h.log.Warn("admission review refused", append(attrs, "reason", out.Reason)...)
		return
	}
	h.log.Info("admission review", attrs...)
}

// refuse answers a request that carries no review to answer: kube-apiserver reports the status and the
// message as the webhook's failure, which failurePolicy Fail turns into a refusal naming the webhook.
func (h *Handler) refuse(w http.ResponseWriter, code int, msg string, start time.Time) {
	h.log.Warn("admission request refused", "status", code, "reason", msg, "duration", time.Since(start))
	http.Error(w, "sriov-udn-binding pod-info webhook: "+msg, code)
}

func humanBytes(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
