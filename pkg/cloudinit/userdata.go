package cloudinit

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Why the sidecar touches user data at all: KubeVirt keeps the guest's instance-id across VM restarts
// (NoCloud: the firmware UUID; ConfigDrive: "<name>.<namespace>", pkg/cloud-init/cloud-init.go), and
// cloud-init applies a datasource's network config only for a new instance unless the "updates" setting
// adds the boot event (stages.py apply_network_config, sources/__init__.py default_update_events). A VM
// restarted onto a new pod, whose VF has new addresses, would keep the first boot's rendered config.
// NoCloud and ConfigDrive both support the boot event (DataSource.supported_update_events), so one
// cloud-config key makes every start apply that start's network config. Per-instance modules (users, SSH
// host keys, runcmd) still run once: the instance-id does not change.

// networkEveryBootConfig is the cloud-config we add. On a restart, cloud-init reads it in its local stage
// from the previous boot's /var/lib/cloud/instance/cloud-config.txt (helpers.py ConfigMerger).
const networkEveryBootConfig = "#cloud-config\n" +
	"# sriov-udn-binding: apply the datasource's network config at every boot, so a restarted VM gets its new pod's addresses\n" +
	"updates:\n  network:\n    when: [boot-new-instance, boot]\n"

// networkEveryBootFile names our MIME part; its presence also makes WithNetworkEveryBoot idempotent.
const networkEveryBootFile = "sriov-udn-binding-network-every-boot.cfg"

// networkEveryBootMerge makes our part fill in only what the user's cloud-config left unset
// (mergers/m_dict.py: no_replace keeps an existing key, and dicts are merged recursively): a user's own
// "updates" setting wins, whatever merge types the user's parts declare.
const networkEveryBootMerge = "dict(no_replace,recurse_dict)+list()+str()"

// WithNetworkEveryBoot returns user data that makes cloud-init apply the network config at every boot, and
// otherwise does what userData did:
//   - none (empty or blank): our cloud-config alone;
//   - a MIME message (what cloud-init reads as one: "mime-version:" in its first 4096 bytes,
//     user_data.py convert_string): nested unchanged as the first part of a multipart/mixed message,
//     ours after it;
//   - anything else (cloud-config, a script, #include, a boothook, a jinja template, an archive): the
//     first part, as "text/x-not-multipart" (7bit when plain ASCII, else base64, so no byte changes):
//     cloud-init then picks its handler from its first line exactly as it does for a whole user data
//     (user_data.py _process_msg, TYPE_NEEDED).
//
// User data that already carries our part is returned unchanged.
func WithNetworkEveryBoot(userData string) string {
	if strings.TrimSpace(userData) == "" {
		return networkEveryBootConfig
	}
	if strings.Contains(userData, networkEveryBootFile) {
		return userData
	}
	boundary := mimeBoundary(userData)
	var b strings.Builder
	b.Grow(len(userData)*4/3 + 1024)
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\n")
	b.WriteString("MIME-Version: 1.0\n\n")
	b.WriteString("--" + boundary + "\n")
	if isMIME(userData) {
		// The line break before the next boundary belongs to the boundary (RFC 2046 5.1.1).
		b.WriteString(userData)
		b.WriteByte('\n')
	} else {
		b.WriteString("Content-Type: text/x-not-multipart; charset=\"utf-8\"\n")
		if plainASCII(userData) {
			// Readable as it was. The line break before the next boundary belongs to the boundary
			// (RFC 2046 5.1.1), so the part's body is userData exactly.
			b.WriteString("Content-Transfer-Encoding: 7bit\n")
			b.WriteString("Content-Disposition: attachment; filename=\"user-data\"\n\n")
			b.WriteString(userData)
			b.WriteByte('\n')
		} else {
			// Python's email package decodes a non-ASCII 7bit/8bit payload with raw-unicode-escape
			// (email/message.py get_payload), which cloud-init would then read as mojibake.
			b.WriteString("Content-Transfer-Encoding: base64\n")
			b.WriteString("Content-Disposition: attachment; filename=\"user-data\"\n\n")
			writeBase64Lines(&b, []byte(userData))
		}
	}
	b.WriteString("--" + boundary + "\n")
	b.WriteString("Content-Type: text/cloud-config; charset=\"us-ascii\"\n")
	b.WriteString("Content-Transfer-Encoding: 7bit\n")
	b.WriteString("Merge-Type: " + networkEveryBootMerge + "\n")
	b.WriteString("Content-Disposition: attachment; filename=\"" + networkEveryBootFile + "\"\n\n")
	b.WriteString(networkEveryBootConfig)
	b.WriteString("\n--" + boundary + "--\n")
	return b.String()
}

// plainASCII reports whether s can travel as a 7bit MIME part unchanged: ASCII, no carriage returns
// (Python's parser treats a lone CR as a line end), and no NUL.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c == '\r' || c == 0 {
			return false
		}
	}
	return true
}

// isMIME is cloud-init's own test (user_data.py convert_string), after its gzip step: user data that
// reaches us through KubeVirt's JSON is text, so gzip cannot occur.
func isMIME(userData string) bool {
	head := userData
	if len(head) > 4096 {
		head = head[:4096]
	}
	return strings.Contains(strings.ToLower(head), "mime-version:")
}

// mimeBoundary is a boundary that does not occur in userData: a hash of it, lengthened in the
// (astronomically unlikely) case that it does.
func mimeBoundary(userData string) string {
	sum := sha256.Sum256([]byte(userData))
	boundary := "==sriov-udn-binding-" + hex.EncodeToString(sum[:8]) + "=="
	for strings.Contains(userData, boundary) {
		boundary += "x"
	}
	return boundary
}

// writeBase64Lines writes data base64-encoded in lines of 76 characters (RFC 2045).
func writeBase64Lines(b *strings.Builder, data []byte) {
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteByte('\n')
		enc = enc[76:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
}

// decodeBase64Lines undoes writeBase64Lines.
func decodeBase64Lines(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
}
