package cloudinit

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type warned struct{ code, message string }

// applyUserData runs ApplyWith on a CloudInitData of dataSource with userData, and returns the UserData
// KubeVirt would get and the warnings.
func applyUserData(t *testing.T, dataSource, userData string, opts ApplyOptions) (string, []warned, error) {
	t.Helper()
	var ws []warned
	opts.Warn = func(code, message string) { ws = append(ws, warned{code, message}) }
	in, err := json.Marshal(map[string]string{"DataSource": dataSource, "UserData": userData, "VolumeName": "ci"})
	require.NoError(t, err)
	out, err := ApplyWith(in, opts, mergeIfaces())
	if err != nil {
		return "", ws, err
	}
	var got kubevirtCloudInitData
	require.NoError(t, json.Unmarshal(out, &got))
	return got.UserData, ws, nil
}

// Our parts are recognised by their MIME headers, never by a mention in the user's text.
func TestComposeUserData_UserTextMentioningOurFileNames_StillGetsOurParts(t *testing.T) {
	script := "#ps1_sysnative\nWrite-Host 'x'\n"
	tests := []struct {
		name, in, dataSource, script, wantFile string
	}{
		{"a script mentioning our cloud-config part", "#!/bin/sh\n# unlike " + networkEveryBootFile + ", this runs once\n",
			dataSourceNoCloud, "", networkEveryBootFile},
		{"a cloud-config writing a file of that name", "#cloud-config\nwrite_files:\n- path: /root/" + networkEveryBootFile + "\n  content: x\n",
			dataSourceConfigDrive, "", networkEveryBootFile},
		{"#ps1_sysnative mentioning our Windows script", "#ps1_sysnative\n# runs after " + WindowsNetworkScriptFilename + "\n",
			dataSourceConfigDrive, script, WindowsNetworkScriptFilename},
		{"a MIME message of the user's naming our file in a part", "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\n" +
			"Content-Type: text/x-shellscript\nContent-Disposition: attachment; filename=\"" + networkEveryBootFile + "\"\n\n#!/bin/sh\necho x\n--B--\n",
			dataSourceNoCloud, "", networkEveryBootFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := composeUserData(tc.in, tc.dataSource, tc.script)
			require.NotEqual(t, tc.in, out, "our part is added")
			files := partFiles(t, out)
			assert.Contains(t, files, tc.wantFile)
			assert.Equal(t, out, composeUserData(out, tc.dataSource, tc.script), "still idempotent")
		})
	}
	for _, ds := range []string{dataSourceNoCloud, dataSourceConfigDrive} {
		ours := composeUserData("", ds, "")
		assert.Equal(t, ours, composeUserData(ours, ds, ""), "our lone cloud-config is ours (%s)", ds)
	}
}

// partFiles lists the file names of a MIME message's top-level parts.
func partFiles(t *testing.T, msg string) []string {
	t.Helper()
	first, _, _ := strings.Cut(msg, "\n")
	boundary := strings.TrimSuffix(strings.TrimPrefix(first, `Content-Type: multipart/mixed; boundary="`), `"`)
	var files []string
	for _, part := range strings.Split(msg, "\n--"+boundary+"\n")[1:] {
		headers, _, _ := strings.Cut(part, "\n\n")
		for _, line := range strings.Split(headers, "\n") {
			if f, ok := strings.CutPrefix(line, `Content-Disposition: attachment; filename="`); ok {
				files = append(files, strings.TrimSuffix(f, `"`))
			}
		}
	}
	return files
}

// A user's write_files entry for our drop-in's path wins, with a warning.
func TestApply_ConfigDrive_UsersWriteFilesEntryForOurDropInWins(t *testing.T) {
	entry := "write_files:\n- path: " + configDriveDropInPath + "\n  content: |\n    [Service]\n    Environment=MINE=1\n"
	cc := "#cloud-config\n" + entry
	mimeB64 := "Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\nContent-Type: text/cloud-config\n" +
		"Content-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString([]byte(cc)) + "\n--B--\n"
	quoted := "#cloud-config\nwrite_files:\n- {path: \"" + configDriveDropInPath + "\", content: x}\n"
	for name, user := range map[string]string{"cloud-config": cc, "a base64 part of the user's MIME message": mimeB64, "flow style, quoted": quoted} {
		t.Run(name, func(t *testing.T) {
			got, ws, err := applyUserData(t, dataSourceConfigDrive, user, ApplyOptions{})
			require.NoError(t, err)
			assert.Equal(t, user, got, "the user's data goes unchanged, without our part")
			require.Len(t, ws, 1)
			assert.Equal(t, WarnUserDropInWins, ws[0].code)
			assert.Contains(t, ws[0].message, configDriveDropInPath)
		})
	}
	t.Run("a mention that writes nothing", func(t *testing.T) {
		user := "#cloud-config\nruncmd:\n- [cat, " + configDriveDropInPath + "]\n"
		got, ws, err := applyUserData(t, dataSourceConfigDrive, user, ApplyOptions{})
		require.NoError(t, err)
		assert.Contains(t, partFiles(t, got), networkEveryBootFile)
		assert.Empty(t, ws)
	})
	t.Run("NoCloud has no drop-in", func(t *testing.T) {
		got, ws, err := applyUserData(t, dataSourceNoCloud, cc, ApplyOptions{})
		require.NoError(t, err)
		assert.Contains(t, partFiles(t, got), networkEveryBootFile)
		assert.Empty(t, ws)
	})
}

// What KubeVirt's JSON encoding makes of binary and Latin-1 user data. Gzip is refused
// (cloud-init could not decompress what is left); a replacement character elsewhere is a warning and the
// data goes on as received.
func TestApply_MangledUserData_GzipRefused_Latin1Warned(t *testing.T) {
	// What virt-launcher sends: json.Marshal of the Go string holding the raw bytes.
	mangle := func(raw []byte) string {
		b, err := json.Marshal(string(raw))
		require.NoError(t, err)
		var s string
		require.NoError(t, json.Unmarshal(b, &s))
		return s
	}
	gzipped := mangle([]byte{0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x53, 0x56, 0x4e, 0xce, 0xc9})
	_, _, err := applyUserData(t, dataSourceNoCloud, gzipped, ApplyOptions{})
	require.Error(t, err)
	for _, want := range []string{"UserData", "gzip", "U+FFFD", "uncompressed"} {
		assert.Contains(t, err.Error(), want)
	}

	latin1 := mangle([]byte("#!/bin/sh\necho caf\xe9 > /etc/motd\n"))
	require.Contains(t, latin1, "\uFFFD")
	got, ws, err := applyUserData(t, dataSourceNoCloud, latin1, ApplyOptions{})
	require.NoError(t, err)
	user, _ := splitUserData(t, got)
	assert.Equal(t, latin1, user, "the data goes on as received")
	require.Len(t, ws, 1)
	assert.Equal(t, WarnUserDataReplacementChars, ws[0].code)
	assert.Contains(t, ws[0].message, "1 U+FFFD")

	_, ws, err = applyUserData(t, dataSourceNoCloud, "#!/bin/sh\necho café\n", ApplyOptions{})
	require.NoError(t, err)
	assert.Empty(t, ws, "UTF-8 text is fine")
}

// The user's data is parsed (MIME, YAML) to find their write_files: any input gives an answer, never a panic.
func FuzzUserDataChecks(f *testing.F) {
	f.Add("#cloud-config\nwrite_files:\n- path: " + configDriveDropInPath + "\n")
	f.Add("Content-Type: multipart/mixed; boundary=\"B\"\nMIME-Version: 1.0\n\n--B\nContent-Type: multipart/mixed; boundary=\"C\"\n\n--C\n" +
		"Content-Type: text/cloud-config\nContent-Transfer-Encoding: quoted-printable\n\n#cloud-config\n--C--\n--B--\n")
	f.Add(ourMessagePrefix + "x\"\n\n--==sriov-udn-binding-x\n\n")
	f.Fuzz(func(t *testing.T, user string) {
		_ = userWritesDropIn(user)
		_ = carriesOurPart(user)
		_, _ = checkUserDataEncoding(user)
	})
}

// The real cloud-init reads what the checks decided: a user script that mentions our file gets our
// cloud-config merged (updates: network), and a user's drop-in entry is the only one for that path.
func TestUserDataChecks_RealCloudInitSeesTheResult(t *testing.T) {
	requireNetConvert(t)
	_, cc := cloudInitUserData(t, composeUserData("#!/bin/sh\n# unlike "+networkEveryBootFile+"\n", dataSourceNoCloud, ""))
	assert.NotNil(t, cc["updates"], "our part reached cloud-init")

	user := "#cloud-config\nwrite_files:\n- path: " + configDriveDropInPath + "\n  content: mine\n"
	got, _, err := applyUserData(t, dataSourceConfigDrive, user, ApplyOptions{})
	require.NoError(t, err)
	_, cc = cloudInitUserData(t, got)
	files, ok := cc["write_files"].([]any)
	require.True(t, ok, "write_files: %v", cc["write_files"])
	require.Len(t, files, 1)
	assert.Equal(t, "mine", files[0].(map[string]any)["content"])
}
