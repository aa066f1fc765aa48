// Package readmetest keeps the repository's Markdown honest; it has only
// tests.
//
// TestGoBlocks builds every ```go fenced block of README.md and docs/*.md as
// a program of its own, inside this module (so that the go.work resolves its
// imports, the Prometheus client's included), and fails naming the file and
// line of a block that does not compile, does not pass go vet, or is not
// gofmt-formatted. Every such block must be a whole file, package clause and
// imports included: a newcomer copies them. A fragment, if one is ever
// needed, is fenced with another language (```go-fragment) and not built.
//
// TestLinks checks every relative link of README.md, docs/*.md,
// tools/benchmarks/README.md and examples/*/README.md: the file or directory
// it names exists, and its #anchor is a heading of the Markdown file it
// points at (GitHub's anchors: lower case, punctuation dropped, spaces as
// hyphens, -1, -2 ... for repeated headings).
package readmetest
