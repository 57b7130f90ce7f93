package cloudinit

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"path"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Warning codes ApplyOptions.Warn receives.
const (
	// WarnUserDropInWins: the user's write_files writes configDriveDropInPath; theirs is kept, ours left out.
	WarnUserDropInWins = "user-drop-in-wins"
	// WarnUserDataReplacementChars: the user data holds U+FFFD (checkUserDataEncoding).
	WarnUserDataReplacementChars = "user-data-not-utf8"
)

// ourMessagePrefix starts every MIME message composeUserData writes.
const ourMessagePrefix = "Content-Type: multipart/mixed; boundary=\"==sriov-udn-binding-"

// carriesOurPart reports whether userData is what composeUserData returns already: one of our lone
// cloud-configs, or a MIME message of ours with a part whose headers name one of our files (a user's text
// that merely mentions a file name is not ours).
func carriesOurPart(userData string) bool {
	if userData == networkEveryBootNoCloud || userData == networkEveryBootConfigDrive {
		return true
	}
	if !strings.HasPrefix(userData, ourMessagePrefix) {
		return false
	}
	first, _, _ := strings.Cut(userData, "\n")
	boundary := strings.TrimSuffix(strings.TrimPrefix(first, `Content-Type: multipart/mixed; boundary="`), `"`)
	if strings.ContainsAny(boundary, "\"\r") {
		return false
	}
	// The boundary occurs nowhere in the user's data (mimeBoundary): every delimiter line is ours.
	for _, part := range strings.Split(userData, "\n--"+boundary+"\n")[1:] {
		headers, _, _ := strings.Cut(part, "\n\n")
		for _, name := range []string{networkEveryBootFile, WindowsNetworkScriptFilename} {
			if strings.Contains("\n"+headers+"\n", "\nContent-Disposition: attachment; filename=\""+name+"\"\n") {
				return true
			}
		}
	}
	return false
}

// userWritesDropIn reports whether a cloud-config of the user's has a write_files entry for
// configDriveDropInPath: cloud-init would write both, ours last, silently replacing theirs.
func userWritesDropIn(userData string) bool {
	if !isMIME(userData) && !strings.Contains(userData, path.Base(configDriveDropInPath)) {
		return false // cheap: the entry's path names the file (YAML escapes aside); a MIME part may be base64
	}
	for _, cc := range userCloudConfigs(userData, 0) {
		if writesPath(cc, configDriveDropInPath) {
			return true
		}
	}
	return false
}

// maxMIMEDepth bounds how deeply userCloudConfigs follows nested multiparts.
const maxMIMEDepth = 8

// userCloudConfigs returns the cloud-configs in userData: the whole of it when it starts with
// "#cloud-config" (not -archive or -jsonp), or the decoded text/cloud-config parts of a MIME message.
func userCloudConfigs(userData string, depth int) []string {
	if !isMIME(userData) {
		head := strings.ToLower(strings.TrimLeft(firstBytes(userData, 32), " \t\r\n"))
		if strings.HasPrefix(head, "#cloud-config") && !strings.HasPrefix(head, "#cloud-config-") {
			return []string{userData}
		}
		return nil
	}
	if depth >= maxMIMEDepth {
		return nil
	}
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	if err != nil {
		return nil
	}
	return cloudConfigParts(msg.Header.Get("Content-Type"), msg.Body, depth)
}

func cloudConfigParts(contentType string, body io.Reader, depth int) []string {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		return nil
	}
	var out []string
	mr := multipart.NewReader(body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err != nil {
			return out
		}
		ct := p.Header.Get("Content-Type")
		mt, _, _ := mime.ParseMediaType(ct)
		var r io.Reader = p
		switch strings.ToLower(p.Header.Get("Content-Transfer-Encoding")) {
		case "base64":
			raw, err := io.ReadAll(io.LimitReader(p, 2*MaxNetworkDataBytes))
			if err != nil {
				continue
			}
			dec, err := decodeBase64Lines(string(raw))
			if err != nil {
				continue
			}
			r = bytes.NewReader(dec)
		case "quoted-printable":
			r = quotedprintable.NewReader(p)
		}
		data, err := io.ReadAll(io.LimitReader(r, MaxNetworkDataBytes+1))
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(mt, "multipart/") && depth+1 < maxMIMEDepth:
			out = append(out, cloudConfigParts(ct, bytes.NewReader(data), depth+1)...)
		case mt == "text/cloud-config":
			out = append(out, string(data))
		case mt == "text/x-not-multipart" || mt == "text/plain" || mt == "":
			out = append(out, userCloudConfigs(string(data), depth+1)...)
		}
	}
}

// writesPath reports whether cloud-config cc has a write_files entry whose path is p. A document past
// the limits, or one that does not parse, writes nothing as far as we can tell.
func writesPath(cc, p string) bool {
	doc, err := decodeYAMLWithinLimits([]byte(cc))
	if err != nil || doc == nil {
		return false
	}
	mb := newMergeBudget()
	files := resolve(mb.lookup(doc.Content[0], "write_files"))
	if files == nil || files.Kind != yaml.SequenceNode {
		return false
	}
	for _, f := range files.Content {
		if v, ok := scalar(mb.lookup(f, "path")); ok && path.Clean(v) == p {
			return true
		}
	}
	return false
}

// gzipMangledPrefix is what gzip's magic (0x1f 0x8b) becomes in KubeVirt's hook call, whose JSON encoding
// replaces the invalid byte 0x8b with U+FFFD (pkg/hooks/manager.go preCloudInitIsoDataToJSON).
const gzipMangledPrefix = "\x1f\uFFFD"

// checkUserDataEncoding refuses gzip-compressed user data, whose bytes KubeVirt's JSON encoding destroyed
// (the VM would boot without the user's config, silently), and describes any other U+FFFD as a warning:
// the user's own character, or a byte that is not UTF-8 that KubeVirt replaced.
func checkUserDataEncoding(userData string) (warning string, err error) {
	if strings.HasPrefix(userData, gzipMangledPrefix) {
		return "", fmt.Errorf("user data is gzip-compressed (it starts with gzip's magic, its second byte already " +
			"replaced by U+FFFD): KubeVirt passes user data to hook sidecars as JSON text, which cannot carry binary " +
			"bytes (pkg/hooks/manager.go preCloudInitIsoDataToJSON), so it cannot be decompressed by cloud-init; " +
			"give the user data uncompressed (userData, userDataBase64 or userDataSecretRef of the text itself)")
	}
	n := strings.Count(userData, "\uFFFD")
	if n == 0 {
		return "", nil
	}
	at := utf8.RuneCountInString(userData[:strings.Index(userData, "\uFFFD")])
	return fmt.Sprintf("user data holds %d U+FFFD replacement character(s), the first at character %d: KubeVirt's JSON "+
		"encoding of the hook call turns every byte that is not UTF-8 (Latin-1 text, binary) into U+FFFD before the "+
		"sidecar sees it, so those bytes are lost; the user data goes on as received; encode it as UTF-8", n, at), nil
}
