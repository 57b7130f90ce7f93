package cloudinit

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Why the sidecar touches user data at all: KubeVirt keeps the guest's instance-id across VM restarts
// (pkg/cloud-init/cloud-init.go), and cloud-init applies a datasource's network config only for a new
// instance unless told otherwise (stages.py apply_network_config): a VM restarted onto a new pod would
// keep the first boot's addresses. NoCloud is told with the "updates" key and the boot event. On
// ConfigDrive that event crashes cloud-init 22.4.2 (canonical/cloud-init#1537), so a systemd drop-in
// makes the local stage see no previous instance-id (stages.py previous_iid): the network config is
// applied as for a new instance, while per-instance modules stay done (their semaphores stay).

// networkEveryBootFile names our part; the part's own headers (carriesOurPart) make composeUserData idempotent.
const networkEveryBootFile = "sriov-udn-binding-network-every-boot.cfg"

// networkEveryBootNoCloud is the cloud-config we add for NoCloud.
const networkEveryBootNoCloud = "#cloud-config\n" +
	"# " + networkEveryBootFile + ": apply the datasource's network config at every boot, so a restarted VM gets its new pod's addresses\n" +
	"updates:\n  network:\n    when: [boot-new-instance, boot]\n"

// networkEveryBootNoCloudMerge makes our part fill in only what the user's cloud-config left unset
// (mergers/m_dict.py: no_replace keeps an existing key, dicts merge recursively, lists are kept): a user's
// own "updates" setting wins, whatever merge types the user's parts declare.
const networkEveryBootNoCloudMerge = "dict(no_replace,recurse_dict)+list()+str()"

// configDriveDropInPath is where write_files puts it.
const configDriveDropInPath = "/etc/systemd/system/cloud-init-local.service.d/50-sriov-udn-binding.conf"

// networkEveryBootConfigDrive is the cloud-config we add for ConfigDrive (the drop-in acts from the
// second boot on).
const networkEveryBootConfigDrive = "#cloud-config\n" +
	"# " + networkEveryBootFile + ": apply the config drive's network config at every boot, so a restarted VM gets its new pod's addresses\n" +
	"write_files:\n" +
	"- path: " + configDriveDropInPath + "\n" +
	"  permissions: '0644'\n" +
	"  content: |\n" +
	"    # " + networkEveryBootFile + ": cloud-init applies the config drive's network config at every boot\n" +
	"    # (its boot event crashes ConfigDrive on cloud-init 22.4.2): the local stage sees no previous instance-id.\n" +
	"    [Service]\n" +
	"    ExecStartPre=-/bin/rm -f /var/lib/cloud/data/instance-id\n"

// networkEveryBootConfigDriveMerge appends our write_files entry to the user's (m_list append, reached
// through recurse_list) and replaces nothing of theirs.
const networkEveryBootConfigDriveMerge = "dict(no_replace,recurse_list)+list(append)+str()"

// composeUserData returns userData with our cloud-config part (networkEveryBoot*) or, for a Windows guest,
// the cloudbase-init script part (windows.go) instead, as a MIME multipart that both cloud-init and
// cloudbase-init read part by part. Blank user data with no script becomes our cloud-config alone; a
// MIME message (isMIME) is nested unchanged; anything else becomes one part, byte for byte, typed by what
// its first line means (userPartOf); user data with no faithful form, or that carries our part already
// (carriesOurPart), is returned unchanged. The script part comes first (cloudbase-init stops walking the
// parts after one that asks for a reboot), our cloud-config last. The message starts with "Content-Type:
// multipart", the exact prefix cloudbase-init tests (plugins/common/userdata.py).
func composeUserData(userData, dataSource, windowsScript string) string {
	ours, mergeType := networkEveryBootNoCloud, networkEveryBootNoCloudMerge
	if dataSource == dataSourceConfigDrive {
		ours, mergeType = networkEveryBootConfigDrive, networkEveryBootConfigDriveMerge
	}
	blank := strings.TrimSpace(userData) == ""
	if blank && windowsScript == "" {
		return ours
	}
	if carriesOurPart(userData) {
		return userData
	}
	var user userPart
	if !blank {
		var ok bool
		if user, ok = userPartOf(userData); !ok {
			return userData
		}
	}
	boundary := mimeBoundary(userData + windowsScript)
	var b strings.Builder
	b.Grow(len(userData)*4/3 + len(windowsScript) + 1024)
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\n")
	b.WriteString("MIME-Version: 1.0\n\n")
	if windowsScript != "" {
		b.WriteString("--" + boundary + "\n")
		writeTextPart(&b, "text/x-shellscript", WindowsNetworkScriptFilename, windowsScript)
	}
	if !blank {
		b.WriteString("--" + boundary + "\n")
		if user.nested {
			// The line break before the next boundary belongs to the boundary (RFC 2046 5.1.1).
			b.WriteString(userData)
			b.WriteByte('\n')
		} else {
			writeTextPart(&b, user.contentType, user.filename, userData)
		}
	}
	if windowsScript == "" {
		b.WriteString("--" + boundary + "\n")
		b.WriteString("Content-Type: text/cloud-config; charset=\"us-ascii\"\n")
		b.WriteString("Content-Transfer-Encoding: 7bit\n")
		b.WriteString("Merge-Type: " + mergeType + "\n")
		b.WriteString("Content-Disposition: attachment; filename=\"" + networkEveryBootFile + "\"\n\n")
		b.WriteString(ours)
		b.WriteByte('\n')
	}
	b.WriteString("--" + boundary + "--\n")
	return b.String()
}

// writeTextPart writes one part's headers and body, byte for byte: as it is when plain ASCII, else base64
// (Python's email package would decode a non-ASCII 7bit payload with raw-unicode-escape: mojibake).
func writeTextPart(b *strings.Builder, contentType, filename, body string) {
	plain := plainASCII(body)
	encoding := "base64"
	if plain {
		encoding = "7bit"
	}
	b.WriteString("Content-Type: " + contentType + "; charset=\"utf-8\"\n")
	b.WriteString("Content-Transfer-Encoding: " + encoding + "\n")
	b.WriteString("Content-Disposition: attachment; filename=\"" + filename + "\"\n\n")
	if plain {
		b.WriteString(body)
		b.WriteByte('\n')
	} else {
		writeBase64Lines(b, []byte(body))
	}
}

// userPart says how the user's data travels as a part.
type userPart struct {
	nested      bool // a MIME message of its own, nested as it is
	contentType string
	filename    string
}

// userPartPrefixes map a user data's first characters (case-insensitive, leading white space skipped, as
// cloud-init compares) to its part, longest first: INCLUSION_TYPES_MAP, and cloudbase-init's script headers.
var userPartPrefixes = []struct{ prefix, contentType, filename string }{
	{"#cloud-config-archive", "text/cloud-config-archive", "user-data"},
	{"#!/usr/bin/env python", "text/x-shellscript", "user-data.py"},
	{"#cloud-config-jsonp", "text/cloud-config-jsonp", "user-data"},
	{"## template: jinja", "text/jinja2", "user-data"},
	{"#cloud-boothook", "text/cloud-boothook", "user-data"},
	{"#ps1_sysnative", "text/x-shellscript", "user-data.ps1"},
	{"#include-once", "text/x-include-once-url", "user-data"},
	{"#cloud-config", "text/cloud-config", "user-data"},
	{"#part-handler", "text/part-handler", "user-data"},
	{"#include", "text/x-include-url", "user-data"},
	{"rem cmd", "text/x-shellscript", "user-data.cmd"},
	{"#ps1", "text/x-shellscript", "user-data.ps1"},
	{"#!", "text/x-shellscript", "user-data.sh"},
}

// userPartOf says how userData travels as a part: its Content-Type (and, for a script, file name) is what
// its first line means to cloud-init (handlers/__init__.py INCLUSION_TYPES_MAP) and to cloudbase-init
// (userdataplugins/shellscript.py picks the interpreter by the file extension). ok is false when it has
// no faithful form: cloudbase-init's #ps1_x86, EC2 <powershell> tags, a PEM certificate it reads raw.
func userPartOf(userData string) (userPart, bool) {
	if isMIME(userData) {
		return userPart{nested: true}, true
	}
	head := strings.ToLower(strings.TrimLeft(firstBytes(userData, 64), " \t\r\n"))
	for _, unfaithful := range []string{"#ps1_x86", "<powershell>", "<script>", "-----begin certificate-----"} {
		if strings.HasPrefix(head, unfaithful) {
			return userPart{}, false
		}
	}
	for _, p := range userPartPrefixes {
		if strings.HasPrefix(head, p.prefix) {
			return userPart{contentType: p.contentType, filename: p.filename}, true
		}
	}
	// What neither reads: cloud-init treats it as text/plain and ignores it, as it does a whole user data.
	return userPart{contentType: "text/x-not-multipart", filename: "user-data"}, true
}

func firstBytes(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// plainASCII reports whether s can travel as a 7bit MIME part unchanged and cheaply: ASCII, no CR
// (Python's parser treats a lone CR as a line end), and no control byte but tab and newline (each a
// 6-byte \u00XX in JSON: 1 MiB of them would pass the 4 MiB answer virt-launcher receives).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || (c < 0x20 && c != '\t' && c != '\n') {
			return false
		}
	}
	return true
}

// isMIME is cloud-init's own test (user_data.py convert_string), after its gzip step (gzip reaches us
// mangled: checkUserDataEncoding refuses it).
func isMIME(userData string) bool {
	return strings.Contains(strings.ToLower(firstBytes(userData, 4096)), "mime-version:")
}

// mimeBoundary is a boundary that does not occur in userData: a hash of it, lengthened if it does.
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
