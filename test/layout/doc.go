// Package layout checks the sidecar module's package layout against its own words: the "Called by" sentence
// of every doc.go names exactly the packages that import it (go list). It reads the repository and runs the go
// command; it holds no code of its own.
package layout
