package hooks

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// compactChunk is how much compactEscapes reads at a time.
const compactChunk = 32 << 10

// compactEscapes copies n bytes of JSON from r into out, writing each \uXXXX escape of a character
// that JSON allows raw (not a control character, quote, backslash or surrogate) as that character's
// UTF-8: the same JSON value, shorter. virt-launcher's encoding/json escapes '<', '>' and '&' (and
// U+2028, U+2029, U+FFFD) as 6 bytes each; a 1 MiB HTML user data arrives as 6 MiB, and this makes it
// 1 MiB again before the sidecar holds it (issue 30). With out nil it only counts: the size to allocate.
// Malformed JSON is copied as it is, for the caller's JSON decoder to refuse.
func compactEscapes(r io.Reader, n uint64, out []byte) (int, error) {
	var buf [compactChunk + 6]byte
	size, carried, inString := 0, 0, false
	for left := n; left > 0 || carried > 0; {
		want := min(uint64(compactChunk), left)
		got, err := io.ReadFull(r, buf[carried:carried+int(want)])
		if err != nil {
			return size, fmt.Errorf("byte %d of %d: %w", n-left+uint64(got), n, err)
		}
		left -= uint64(got)
		chunk, final := buf[:carried+got], left == 0
		carried = 0
		for i := 0; i < len(chunk); {
			c := chunk[i]
			if c == '"' {
				inString = !inString
			}
			if !inString || c != '\\' {
				if out != nil {
					out[size] = c
				}
				size++
				i++
				continue
			}
			// An escape: two bytes, or six for \uXXXX. One cut by the chunk's end waits for the next.
			need := 2
			if i+1 < len(chunk) && chunk[i+1] == 'u' {
				need = 6
			}
			if i+need > len(chunk) {
				if !final {
					carried = copy(buf[:], chunk[i:])
					break
				}
				need = len(chunk) - i // truncated input: copied as it is
			}
			esc := chunk[i : i+need]
			i += need
			if need == 6 {
				if v, ok := hex4(esc[2:]); ok && v >= 0x20 && v != '"' && v != '\\' && (v < 0xD800 || v > 0xDFFF) {
					var u [utf8.UTFMax]byte
					esc = u[:utf8.EncodeRune(u[:], rune(v))]
				}
			}
			if out != nil {
				copy(out[size:], esc)
			}
			size += len(esc)
		}
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
