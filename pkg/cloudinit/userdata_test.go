package cloudinit

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// splitUserData reads user data made by composeUserData with Go's MIME reader and returns the
// user's part (decoded; a nested MIME message as its raw text) and ours.
func splitUserData(t *testing.T, userData string) (user, ours string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	require.NoError(t, err, "user data is a MIME message")
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/mixed", mediaType)
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var parts []string
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(p)
		require.NoError(t, err)
		if p.Header.Get("Content-Transfer-Encoding") == "base64" {
			dec, err := decodeBase64Lines(string(body))
			require.NoError(t, err)
			body = dec
		}
		parts = append(parts, string(body))
	}
	require.Len(t, parts, 2, "the user's part and ours")
	return parts[0], parts[1]
}

func TestWithNetworkEveryBoot_KeepsEveryUserDataFormat(t *testing.T) {
	mimeUser := "Content-Type: multipart/mixed; boundary=\"XYZ\"\nMIME-Version: 1.0\n\n--XYZ\n" +
		"Content-Type: text/cloud-config\n\n#cloud-config\nruncmd: [[touch, /a]]\n--XYZ\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho b\n--XYZ--\n"
	tests := []struct {
		name, in string
		wantUser string // "" = no MIME: the result is our cloud-config alone
	}{
		{"none", "", ""},
		{"blank", " \n\t\n", ""},
		{"cloud-config", "#cloud-config\nruncmd:\n- [touch, /x]\n", "#cloud-config\nruncmd:\n- [touch, /x]\n"},
		{"cloud-config without final newline", "#cloud-config\nfoo: 1", "#cloud-config\nfoo: 1"},
		{"script", "#!/bin/bash\necho 'hi' > /tmp/x\n", "#!/bin/bash\necho 'hi' > /tmp/x\n"},
		{"include", "#include\nhttp://10.0.2.100/cc.yaml\n", "#include\nhttp://10.0.2.100/cc.yaml\n"},
		{"non-ASCII travels as base64", "#cloud-config\nfinal_message: \"größe ✓\"\n", "#cloud-config\nfinal_message: \"größe ✓\"\n"},
		{"carriage returns", "#!/bin/sh\r\necho x\r\n", "#!/bin/sh\r\necho x\r\n"},
		{"looks like our boundary", "#!/bin/sh\n# --==sriov-udn-binding-0000000000000000==\n", "#!/bin/sh\n# --==sriov-udn-binding-0000000000000000==\n"},
		// Nested whole: Go's reader takes the user's headers as the part's, leaving their body.
		{"MIME", mimeUser, mimeUser[strings.Index(mimeUser, "\n\n")+2:]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := composeUserData(tc.in, dataSourceNoCloud, "")
			if tc.wantUser == "" {
				assert.Equal(t, networkEveryBootNoCloud, out)
				return
			}
			user, ours := splitUserData(t, out)
			assert.Equal(t, tc.wantUser, user)
			assert.Equal(t, networkEveryBootNoCloud, ours)
			assert.Equal(t, out, composeUserData(out, dataSourceNoCloud, ""), "idempotent")
		})
	}
}

// cloudInitUserData runs the real cloud-init's user-data processor (user_data.py, the code every boot runs)
// and its cloud-config merge (handlers/cloud_config.py) on userData, and reports the parts it found and
// the merged cloud-config.
func cloudInitUserData(t *testing.T, userData string) (parts []string, cloudConfig map[string]any) {
	t.Helper()
	const script = `
import json, sys, tempfile
from cloudinit import helpers, user_data, handlers
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
tmp = tempfile.mkdtemp()
paths = helpers.Paths({"cloud_dir": tmp, "run_dir": tmp})
msg = user_data.UserDataProcessor(paths).process(sys.stdin.read())
h = CloudConfigPartHandler(paths)
h.handle_part(None, handlers.CONTENT_START, None, None, None, None)
parts = []
for part in msg.walk():
    if part.get_content_maintype() == "multipart":
        continue
    ctype = part.get_content_type()
    payload = part.get_payload(decode=True).decode()
    parts.append({"type": ctype, "payload": payload})
    if ctype == "text/cloud-config":
        h.handle_part(None, ctype, part.get_filename(), payload, None, dict(part.items()))
print(json.dumps({"parts": parts, "cloud_config": h.cloud_buf}))
`
	cmd := exec.Command(cloudInitPython(t), "-c", script)
	cmd.Stdin = strings.NewReader(userData)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		require.NoError(t, err, "cloud-init user-data processing failed:\n%s", ee.Stderr)
	}
	require.NoError(t, err)
	var res struct {
		Parts []struct {
			Type    string `json:"type"`
			Payload string `json:"payload"`
		} `json:"parts"`
		CloudConfig map[string]any `json:"cloud_config"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "output: %s", out)
	for _, p := range res.Parts {
		parts = append(parts, p.Type+": "+p.Payload)
	}
	return parts, res.CloudConfig
}

// cloudInitPython is the interpreter of the installed cloud-init (its #! line): the one whose
// path has the cloudinit package, whatever python3 comes first on PATH.
func cloudInitPython(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("cloud-init")
	require.NoError(t, err)
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	line, _, _ := strings.Cut(string(data), "\n")
	interp, ok := strings.CutPrefix(line, "#!")
	require.True(t, ok, "%s has no #! line", bin)
	fields := strings.Fields(interp)
	require.NotEmpty(t, fields)
	return fields[0]
}

func TestWithNetworkEveryBoot_CloudInitSeesTheUsersPartsAndOurUpdates(t *testing.T) {
	requireNetConvert(t)
	everyBoot := map[string]any{"network": map[string]any{"when": []any{"boot-new-instance", "boot"}}}
	// cloud-init fetches #include URLs while it processes the user data (user_data.py _do_include).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "#cloud-config\nincluded: true\n")
	}))
	defer srv.Close()
	tests := []struct {
		name        string
		in          string
		wantTypes   []string       // content types cloud-init gives the parts, in order
		wantUpdates map[string]any // merged "updates"
		wantKey     string         // a key of the user's cloud-config that must survive
	}{
		{"none", "", []string{"text/cloud-config"}, everyBoot, ""},
		{"cloud-config", "#cloud-config\nruncmd:\n- [touch, /x]\n", []string{"text/cloud-config", "text/cloud-config"}, everyBoot, "runcmd"},
		{"script", "#!/bin/sh\necho hi\n", []string{"text/x-shellscript", "text/cloud-config"}, everyBoot, ""},
		{"include", "#include\n" + srv.URL + "/included.yaml\n", []string{"text/cloud-config", "text/cloud-config"}, everyBoot, "included"},
		{"boothook", "#cloud-boothook\n#!/bin/sh\necho hi\n", []string{"text/cloud-boothook", "text/cloud-config"}, everyBoot, ""},
		{"the user's own updates win", "#cloud-config\nupdates:\n  network:\n    when: [boot-new-instance]\n",
			[]string{"text/cloud-config", "text/cloud-config"}, map[string]any{"network": map[string]any{"when": []any{"boot-new-instance"}}}, "updates"},
		{"MIME with a merge type that replaces", "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\n" +
			"Content-Type: text/cloud-config\nMerge-Type: dict(replace)+list(append)+str()\n\n#cloud-config\nupdates:\n  network:\n    when: [hotplug]\n" +
			"--B\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho b\n--B--\n",
			[]string{"text/cloud-config", "text/x-shellscript", "text/cloud-config"}, map[string]any{"network": map[string]any{"when": []any{"hotplug"}}}, "updates"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parts, cc := cloudInitUserData(t, composeUserData(tc.in, dataSourceNoCloud, ""))
			var types []string
			for _, p := range parts {
				types = append(types, strings.SplitN(p, ":", 2)[0])
			}
			assert.Equal(t, tc.wantTypes, types, "parts: %q", parts)
			assert.Equal(t, tc.wantUpdates, cc["updates"])
			if tc.wantKey != "" {
				assert.Contains(t, cc, tc.wantKey)
			}
			if strings.HasPrefix(tc.in, "#!") {
				assert.Contains(t, parts, "text/x-shellscript: "+tc.in, "the script reaches cloud-init byte for byte")
			}
		})
	}
}

func TestComposeUserData_PartsCloudbaseInitRunsToo(t *testing.T) {
	script := "#ps1_sysnative\nWrite-Host 'x'\n"
	tests := []struct {
		name, in, script string
		wantType         []string // Content-Type of each part, in order ("" = unchanged, no MIME)
		wantFile         []string
	}{
		{"PowerShell user data: a .ps1 script part", "#ps1_sysnative\nNew-Item C:\\x\n", "",
			[]string{"text/x-shellscript", "text/cloud-config"}, []string{"user-data.ps1", networkEveryBootFile}},
		{"cmd user data", "rem cmd\r\necho x\r\n", "", []string{"text/x-shellscript", "text/cloud-config"}, []string{"user-data.cmd", networkEveryBootFile}},
		{"shell script", "#!/bin/sh\necho x\n", "", []string{"text/x-shellscript", "text/cloud-config"}, []string{"user-data.sh", networkEveryBootFile}},
		{"cloud-config", "#cloud-config\n{}\n", "", []string{"text/cloud-config", "text/cloud-config"}, []string{"user-data", networkEveryBootFile}},
		// A Windows guest (it asked for the script) gets no part of cloud-init's.
		{"the Windows script comes first", "#cloud-config\n{}\n", script,
			[]string{"text/x-shellscript", "text/cloud-config"}, []string{WindowsNetworkScriptFilename, "user-data"}},
		{"no user data, a script", "", script, []string{"text/x-shellscript"}, []string{WindowsNetworkScriptFilename}},
		{"#ps1_x86 has no faithful part: unchanged", "#ps1_x86\nWrite-Host x\n", script, nil, nil},
		{"EC2 <powershell> tags: unchanged", "<powershell>\nWrite-Host x\n</powershell>\n", script, nil, nil},
		{"a PEM certificate: unchanged", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", script, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := composeUserData(tc.in, dataSourceConfigDrive, tc.script)
			if tc.wantType == nil {
				assert.Equal(t, tc.in, out)
				return
			}
			require.True(t, strings.HasPrefix(out, "Content-Type: multipart"), "cloudbase-init tests exactly this prefix")
			msg, err := mail.ReadMessage(strings.NewReader(out))
			require.NoError(t, err)
			_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
			require.NoError(t, err)
			mr := multipart.NewReader(msg.Body, params["boundary"])
			var types, files []string
			for {
				p, err := mr.NextRawPart()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				mt, _, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
				require.NoError(t, err)
				types = append(types, mt)
				files = append(files, p.FileName())
				body, err := io.ReadAll(p)
				require.NoError(t, err)
				if p.FileName() == WindowsNetworkScriptFilename {
					assert.Equal(t, tc.script, string(body))
				}
			}
			assert.Equal(t, tc.wantType, types)
			assert.Equal(t, tc.wantFile, files)
		})
	}
}

// Whatever the user data, it survives composition byte for byte, as the first part (or untouched).
func FuzzComposeUserData(f *testing.F) {
	for _, seed := range []string{"", "#cloud-config\n{}\n", "#!/bin/sh\necho x", "#include\nhttp://x\n", "#ps1_x86\nx", "größe", "a\r\nb",
		"Content-Type: multipart/mixed; boundary=B\nMIME-Version: 1.0\n\n--B\n\n#cloud-config\n--B--\n"} {
		f.Add(seed, "")
		f.Add(seed, "#ps1_sysnative\nexit 0\n")
	}
	f.Fuzz(func(t *testing.T, user, script string) {
		out := composeUserData(user, dataSourceNoCloud, script)
		blank := strings.TrimSpace(user) == ""
		switch {
		case blank && script == "":
			require.Equal(t, networkEveryBootNoCloud, out)
			return
		case out == user:
			return // no faithful form, or ours already there
		}
		require.True(t, strings.HasPrefix(out, "Content-Type: multipart/mixed"))
		if blank || isMIME(user) {
			return
		}
		msg, err := mail.ReadMessage(strings.NewReader(out))
		require.NoError(t, err)
		_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		require.NoError(t, err)
		mr := multipart.NewReader(msg.Body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			require.NoError(t, err, "the user's part is there")
			if p.FileName() == WindowsNetworkScriptFilename {
				continue
			}
			body, err := io.ReadAll(p)
			require.NoError(t, err)
			if p.Header.Get("Content-Transfer-Encoding") == "base64" {
				body, err = decodeBase64Lines(string(body))
				require.NoError(t, err)
			}
			require.Equal(t, user, string(body))
			return
		}
	})
}

func TestWithNetworkEveryBoot_ConfigDrive_CloudInitGetsTheDropInBesideTheUsersFiles(t *testing.T) {
	requireNetConvert(t)
	user := "#cloud-config\nwrite_files:\n- path: /etc/mine\n  content: x\nupdates:\n  network:\n    when: [boot-new-instance]\n"
	_, cc := cloudInitUserData(t, composeUserData(user, dataSourceConfigDrive, ""))
	files, ok := cc["write_files"].([]any)
	require.True(t, ok, "write_files: %v", cc["write_files"])
	var paths []string
	for _, f := range files {
		paths = append(paths, f.(map[string]any)["path"].(string))
	}
	assert.Equal(t, []string{"/etc/mine", configDriveDropInPath}, paths, "ours appended to the user's")
	assert.Equal(t, map[string]any{"network": map[string]any{"when": []any{"boot-new-instance"}}}, cc["updates"], "the user's own key untouched")
	assert.Contains(t, files[1].(map[string]any)["content"], "ExecStartPre=-/bin/rm -f /var/lib/cloud/data/instance-id")

	_, cc = cloudInitUserData(t, composeUserData("", dataSourceConfigDrive, ""))
	assert.Nil(t, cc["updates"], "no boot event on ConfigDrive: it crashes cloud-init 22.4.2")
	require.Len(t, cc["write_files"], 1)
}
