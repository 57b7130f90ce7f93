package bench

import "strings"

// SecretUserDataBytes is the largest user data a Secret can hold: Kubernetes caps a Secret's data at
// 1 MiB, keys included (k8s.io/kubernetes pkg/apis/core/validation ValidateSecret, MaxSecretSize), and
// KubeVirt reads the user data from key "userdata" (pkg/util/cloud-init: "userdata" or "userData").
// Inline user data is capped at 2048 bytes (vmi-create-admitter.go cloudInitUserMaxLen), which tells
// users to use userDataSecretRef for more.
const SecretUserDataBytes = 1<<20 - len("userdata")

// SecretUserData is one worst case of Secret user data: what json.Marshal in virt-launcher's
// hook call (pkg/hooks/manager.go preCloudInitIsoDataToJSON) makes largest, and non-ASCII text.
type SecretUserData struct {
	Name     string
	UserData string
}

// SecretUserDataCases are 1 MiB Secrets, each a class of bytes virt-launcher's JSON makes larger: an HTML
// heredoc of '<', '>' and '&' (6 bytes each in JSON), a script full of control bytes (6 bytes each), one line
// of every control byte, NUL included, a script of quotes and backslashes (2 bytes each), non-ASCII text
// (U+2028 included: 6 bytes for 3), and Latin-1 text, not UTF-8 (each byte past ASCII arrives as U+FFFD: 3
// bytes, 6 in JSON).
func SecretUserDataCases() []SecretUserData {
	fill := func(head, line string) string {
		var b strings.Builder
		b.Grow(SecretUserDataBytes)
		b.WriteString(head)
		for b.Len()+len(line) <= SecretUserDataBytes {
			b.WriteString(line)
		}
		return b.String()
	}
	var ctl strings.Builder
	for c := byte(1); c < 0x20; c++ {
		if c != '\n' && c != '\r' && c != '\t' {
			ctl.WriteByte(c)
		}
	}
	return []SecretUserData{
		{"HTML <>& heredoc, 1 MiB", fill("#!/bin/sh\ncat > /var/www/index.html <<'EOF'\n", strings.Repeat("<>&", 21)+"\n")},
		{"script with control bytes, 1 MiB", fill("#!/bin/sh\n", "#"+strings.Repeat(ctl.String(), 2)+"\n")},
		{"one line of every control byte, NUL included, 1 MiB", fill("#!/bin/sh\n#", "\x00"+ctl.String()+"\r\t")},
		{"quotes and backslashes, 1 MiB", fill("#!/bin/sh\n", `echo "\"\\\"\\\\" '\\'"\"" >>/tmp/q`+"\n")},
		{"non-ASCII cloud-config, 1 MiB", fill("#cloud-config\n", "# größe ✓ 😀 \u2028 ß€\n")},
		{"Latin-1 cloud-config, not UTF-8, 1 MiB", fill("#cloud-config\n", "# Gr\xf6\xdfe, caf\xe9, na\xefve, \xe0 la \xb5\n")},
	}
}
