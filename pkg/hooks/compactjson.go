package hooks

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// compactEscapes copies n bytes of JSON from r into out, writing each \uXXXX escape of a character
// that JSON allows raw (not a control character, quote, backslash or surrogate) as that character's
// UTF-8: the same JSON value, shorter. virt-launcher's encoding/json escapes '<', '>' and '&' (and
// U+2028, U+2029, U+FFFD) as 6 bytes each; a 1 MiB HTML user data arrives as 6 MiB, and this makes it
// 1 MiB again before the sidecar holds it (issue 30). With out nil it only counts: the size to allocate.
// Malformed JSON is copied as it is, for the caller's JSON decoder to refuse.
func compactEscapes(r io.ByteReader, n uint64, out []byte) (int, error) {
	size := 0
	put := func(bs ...byte) {
		if out != nil {
			copy(out[size:], bs)
		}
		size += len(bs)
	}
	next := func(i *uint64) (byte, error) {
		c, err := r.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("byte %d of %d: %w", *i, n, err)
		}
		*i++
		return c, nil
	}
	inString := false
	for i := uint64(0); i < n; {
		c, err := next(&i)
		if err != nil {
			return size, err
		}
		switch {
		case c == '"':
			inString = !inString
			put(c)
			continue
		case !inString || c != '\\' || i == n:
			put(c)
			continue
		}
		e, err := next(&i)
		if err != nil {
			return size, err
		}
		if e != 'u' || n-i < 4 {
			put(c, e) // \" \\ \n ... stay as they are
			continue
		}
		var h [4]byte
		for k := range h {
			if h[k], err = next(&i); err != nil {
				return size, err
			}
		}
		v, ok := hex4(h[:])
		if !ok || v < 0x20 || v == '"' || v == '\\' || (v >= 0xD800 && v <= 0xDFFF) {
			put(c, e, h[0], h[1], h[2], h[3])
			continue
		}
		var u [utf8.UTFMax]byte
		put(u[:utf8.EncodeRune(u[:], rune(v))]...)
	}
	return size, nil
}

func hex4(h []byte) (uint32, bool) {
	var v uint32
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}
