#!/usr/bin/env bash
# Checks that a version of Sluice can be depended on as a user would: it
# publishes the repository's four modules (the library, prometheus/, otel/
# and tools/) at one version to a module proxy made of files, then, outside
# the repository, with no go.work and only that proxy and the public one
# (GOPROXY=file://...,https://proxy.golang.org), `go get`s the library and
# the prometheus and otel modules into a scratch module that builds and runs, and
# `go install`s the CLI at that version ("sluice --version" must say it).
#
#   scripts/release-check.sh            # HEAD, as a temporary version
#   scripts/release-check.sh v0.1.0     # the tags v0.1.0, prometheus/v0.1.0, otel/v0.1.0, tools/v0.1.0
#
# Without an argument (CI, on a clean clone) it needs no tag: HEAD is
# published at a version of its own, v0.1.0-0.<commit time>-<commit>, its
# modules' requirements of each other rewritten to that version, as a
# release's commit names its own version (docs/stability.md#releasing).
# With a version, each module is published from its own tag exactly as
# tagged: its requirements of the others must already name that version, or
# the check fails.
#
# Checksums are off for these modules only (GONOSUMDB: the public checksum
# database has never seen them); every other module is checked as usual.
# The scratch work uses a module cache of its own, so that nothing published
# here reaches the machine's module cache; the public modules come from the
# public proxy (a warm Go build cache keeps the builds short).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS

lib=github.com/sluice-rpc/sluice
mods=(. prometheus otel tools)   # in dependency order: each needs only those before it

# No go.mod may replace anything: a replace is ignored in a dependency's
# go.mod, so the go.mod of a release must work without one.
if grep -rn '^replace' --include=go.mod . ; then
  echo "release-check: a go.mod has a replace (above): go.work joins the modules instead" >&2
  exit 1
fi

tmp=$(mktemp -d)
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
proxy=$tmp/proxy
export GOWORK=off GOFLAGS=-modcacherw GOMODCACHE=$tmp/modcache
export GOPROXY="file://$proxy,https://proxy.golang.org" GONOSUMDB="$lib" GOPRIVATE= GONOPROXY=

# quiet CMD...: runs CMD with its output in a log, shown only if it fails
# (a fresh module cache makes the go command list every download).
quiet() { "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; echo "release-check: failed: $*" >&2; return 1; }; }

modpath() { if [ "$1" = . ]; then echo "$lib"; else echo "$lib/$1"; fi; }
tagof() { if [ "$1" = . ]; then echo "$2"; else echo "$1/$2"; fi; }

if [ $# -gt 0 ]; then
  version=$1
  temporary=false
  if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
    echo "release-check: version $version: want a semantic version such as v0.1.0" >&2
    exit 2
  fi
  for m in "${mods[@]}"; do
    if ! git rev-parse -q --verify "refs/tags/$(tagof "$m" "$version")^{commit}" >/dev/null; then
      echo "release-check: no tag $(tagof "$m" "$version"): tag each module (docs/stability.md#releasing)" >&2
      exit 2
    fi
  done
else
  temporary=true
  stamp=$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)
  version="v0.1.0-0.$stamp-$(git rev-parse --short=12 HEAD)"
fi
echo "release-check: publishing $lib, $lib/prometheus, $lib/otel, $lib/tools at $version to file://$proxy"

# publish MODDIR REV: writes MODDIR's module at $version, as of REV, to the
# proxy: @v/list, .info, .mod and a zip holding MODDIR's files but those of
# nested modules (the module zip's rule).
publish() {
  local m=$1 rev=$2 path dir src
  path=$(modpath "$m")
  dir=$proxy/$path/@v
  src=$tmp/src/${m//[.\/]/_}
  mkdir -p "$dir" "$src"
  git archive --format=tar "$rev" -- "$m" | tar -x -C "$src"
  src=$src/$m
  # Its requirements of the others: at this version. A release's commit
  # says so; for a temporary version, this rewrites them as a release would.
  # (No go.sum line is needed for them: the go command takes their sums
  # from the checksum database, or here, with GONOSUMDB, from the proxy.)
  local o op req
  for o in "${mods[@]}"; do
    op=$(modpath "$o")
    [ "$op" != "$path" ] || continue
    req=$(awk -v p="$op" '$1 == p { print $2 } $1 == "require" && $2 == p { print $3 }' "$src/go.mod")
    if [ -z "$req" ] || [ "$req" = "$version" ]; then
      continue
    elif $temporary; then
      (cd "$src" && go mod edit -require="$op@$version")
    else
      echo "release-check: $path at $rev requires $op $req, not $version" >&2
      exit 1
    fi
  done
  local when
  when=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd "$rev")
  printf '{"Version":"%s","Time":"%s"}\n' "$version" "$when" >"$dir/$version.info"
  cp "$src/go.mod" "$dir/$version.mod"
  echo "$version" >>"$dir/list"
  (cd "$src" && "$tmp/modzip" "$path@$version" "$dir/$version.zip")
}

# modzip PREFIX OUT: zips the current directory as a module zip: every
# regular file under PREFIX/, but those of directories holding a go.mod of
# their own (nested modules) and of the top vendor/. Go, not zip or python:
# CI has only Go.
mkdir -p "$tmp/modzipsrc"
cat >"$tmp/modzipsrc/main.go" <<'GO'
package main

import (
	"archive/zip"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
)

func main() {
	prefix, out := os.Args[1], os.Args[2]
	f, err := os.Create(out)
	if err != nil {
		log.Fatal(err)
	}
	z := zip.NewWriter(f)
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != "." && (err == nil || p == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		w, err := z.Create(prefix + "/" + filepath.ToSlash(p))
		if err != nil {
			return err
		}
		r, err := os.Open(p)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.Copy(w, r)
		return err
	})
	if err == nil {
		err = z.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		log.Fatal(err)
	}
}
GO
(cd "$tmp/modzipsrc" && go mod init modzip >/dev/null 2>&1 && go build -o "$tmp/modzip" .)

for m in "${mods[@]}"; do
  if $temporary; then publish "$m" HEAD; else publish "$m" "$(tagof "$m" "$version")"; fi
done
echo "release-check: published in $((SECONDS - start)) s"

# A user's module: the library and the prometheus and otel modules at the
# version, a server and a client calling it, metrics at /metrics, the
# client's spans recorded by OpenTelemetry.
scratch=$tmp/scratch
mkdir -p "$scratch"
cd "$scratch"
go mod init example.com/scratch >/dev/null 2>&1
cat >main.go <<'GO'
package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/otel"
	"github.com/sluice-rpc/sluice/prometheus"
	"github.com/uber/tchannel-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func main() {
	m, err := prometheus.New(prometheus.Options{})
	check(err)
	srv, err := channel.New("echo")
	check(err)
	defer srv.Close()
	check(srv.RegisterRaw("echo", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	}))
	check(srv.ListenAndServe("127.0.0.1:0"))
	spans := tracetest.NewInMemoryExporter()
	tr, err := otel.NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	check(err)
	ch, err := channel.New("scratch", channel.WithScope(m.Scope()),
		channel.WithTChannelOptions(tchannel.ChannelOptions{Tracer: tr}))
	check(err)
	defer ch.Close()
	c, err := ch.NewClient("echo", channel.WithMethods("echo"))
	check(err)
	check(c.AddPeer(srv.HostPort()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.CallRaw(ctx, "echo", nil, []byte("hello"))
	check(err)
	check(m.Close())
	web := httptest.NewServer(m.Handler())
	defer web.Close()
	r, err := web.Client().Get(web.URL)
	check(err)
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(body), `call_latency_count{method="echo",service="echo"} 1`) {
		check(fmt.Errorf("/metrics lacks call_latency_count for the call:\n%s", body))
	}
	if n := len(spans.GetSpans()); n != 2 { // the call's and its attempt's
		check(fmt.Errorf("OpenTelemetry recorded %d spans of the call, want 2", n))
	}
	fmt.Printf("scratch: called echo: %s; /metrics has its latency; its spans are recorded\n", res.Arg3)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "scratch:", err)
		os.Exit(1)
	}
}
GO
GOFLAGS="-modcacherw -mod=mod" quiet go get "$lib@$version" "$lib/prometheus@$version" "$lib/otel@$version"
GOFLAGS="-modcacherw -mod=mod" quiet go mod tidy
if ! grep -q "^	$lib $version$" go.mod || ! grep -q "^	$lib/prometheus $version$" go.mod || ! grep -q "^	$lib/otel $version$" go.mod; then
  echo "release-check: the scratch module does not require the three modules at $version:" >&2
  cat go.mod >&2
  exit 1
fi
quiet go vet ./...
go run .
echo "release-check: go get of $lib, $lib/prometheus and $lib/otel at $version: built and ran ($((SECONDS - start)) s)"

# The CLI, as its README says: go install ...@VERSION, from no module.
cd "$tmp"
GOBIN=$tmp/bin quiet go install "$lib/tools/cmd/sluice@$version"
got=$("$tmp/bin/sluice" --version)
if [ "$got" != "sluice $version" ]; then
  echo "release-check: sluice --version says \"$got\", want \"sluice $version\"" >&2
  exit 1
fi
echo "release-check: go install $lib/tools/cmd/sluice@$version: $got"
echo "release-check: ok in $((SECONDS - start)) s"
