package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

const isoSectorSize = 2048

// ErrISOFileNotFound says the root directory of the image has no file of the requested name.
var ErrISOFileNotFound = errors.New("file not found in ISO root directory")

// isoRootFile returns the content of the file called name in the root directory of an ISO 9660
// image, matched by its Rock Ridge name (KubeVirt builds cloud-init disks with `xorrisofs -rock`,
// pkg/cloud-init/cloud-init.go) or, failing that, by its ISO 9660 name without the ";1" version.
func isoRootFile(image []byte, name string) ([]byte, error) {
	pvd, err := isoSlice(image, 16*isoSectorSize, isoSectorSize)
	if err != nil {
		return nil, fmt.Errorf("read primary volume descriptor: %w", err)
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return nil, fmt.Errorf("sector 16 is not an ISO 9660 primary volume descriptor")
	}
	root := pvd[156 : 156+34]
	extent := binary.LittleEndian.Uint32(root[2:6])
	size := binary.LittleEndian.Uint32(root[10:14])
	dir, err := isoSlice(image, int64(extent)*isoSectorSize, int64(size))
	if err != nil {
		return nil, fmt.Errorf("read root directory: %w", err)
	}
	for off := 0; off < len(dir); {
		recLen := int(dir[off])
		if recLen == 0 { // records never span sectors: the rest of this sector is padding
			off = (off/isoSectorSize + 1) * isoSectorSize
			continue
		}
		if recLen < 34 || off+recLen > len(dir) {
			return nil, fmt.Errorf("root directory record at offset %d has bad length %d", off, recLen)
		}
		rec := dir[off : off+recLen]
		off += recLen
		nameLen := int(rec[32])
		if 33+nameLen > len(rec) || rec[25]&0x02 != 0 { // bad name length, or a directory
			continue
		}
		isoName := string(rec[33 : 33+nameLen])
		suStart := 33 + nameLen
		if nameLen%2 == 0 {
			suStart++ // padding byte keeps the system use area at an even offset
		}
		entryName := rockRidgeName(rec[min(suStart, len(rec)):])
		if entryName == "" {
			entryName = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(isoName, ";1"), "."))
		}
		if entryName != name {
			continue
		}
		fileExtent := binary.LittleEndian.Uint32(rec[2:6])
		fileSize := binary.LittleEndian.Uint32(rec[10:14])
		data, err := isoSlice(image, int64(fileExtent)*isoSectorSize, int64(fileSize))
		if err != nil {
			return nil, fmt.Errorf("read %q: %w", name, err)
		}
		return bytes.Clone(data), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrISOFileNotFound, name)
}

// rockRidgeName returns the name from the NM entries of a SUSP system use area, or "".
func rockRidgeName(su []byte) string {
	var name strings.Builder
	for len(su) >= 4 {
		entryLen := int(su[2])
		if entryLen < 4 || entryLen > len(su) {
			break
		}
		if string(su[0:2]) == "NM" && entryLen >= 5 {
			name.Write(su[5:entryLen])
		}
		su = su[entryLen:]
	}
	return name.String()
}

func isoSlice(image []byte, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > int64(len(image)) {
		return nil, fmt.Errorf("range [%d, %d) outside the %d-byte image", off, off+n, len(image))
	}
	return image[off : off+n], nil
}
