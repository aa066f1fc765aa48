package apiconv_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/internal/config"
)

var update = flag.Bool("update", false, "rewrite configs_gen_test.go from the library's source")

const module = "github.com/sluice-rpc/sluice"

// configName is the name pattern of a configuration type. A struct type
// is also a configuration when it has a Validate (or validate) method, or
// when a configuration holds it in a field.
var configName = regexp.MustCompile(`(Config|Limits|Budget|Check|TLS|Policy|Settings|Options)$`)

// notConfig lists the struct types the rules above would take for
// configurations but which are not: each says why.
var notConfig = map[string]string{
	// A query of the status page, parsed from a URL; its Validate checks a
	// request, not a configuration.
	"leasing/server.StatusQuery": "an HTTP request's query",
	// The resource templates of a Doorman server's YAML configuration are
	// the wire format of the original Doorman (their fields follow its
	// protobuf); Repository.Validate checks a document, not Go fields.
	"leasing/server.Template":   "the original Doorman's YAML template",
	"leasing/server.Repository": "the original Doorman's YAML document",
	"leasing/server.Algorithm":  "part of the original Doorman's YAML template",
	"leasing/server.Parameter":  "part of the original Doorman's YAML template",
	// The parsed form of the JSON service config: Parse and New validate
	// it and report serviceconfig.Error values naming JSON paths.
	"serviceconfig.Config":       "a parsed JSON document",
	"serviceconfig.MethodConfig": "part of a parsed JSON document",
	"serviceconfig.Name":         "part of a parsed JSON document",
	"serviceconfig.Balancing":    "part of a parsed JSON document",
	// A resolver target parsed from a string (Parse), not set by hand.
	"discovery/dns.Target": "a parsed DNS target",
	// A client certificate's identity, read from a handshake.
	"tlsfiles.Identity": "read from a handshake, not configured",
}

// skipDir reports whether the directory rel (slash-separated, relative to
// the module root) holds no library package: the tools module, examples,
// internal packages (nobody's configuration API), generated wire code and
// test data.
func skipDir(rel string) bool {
	base := filepath.Base(rel)
	switch {
	case rel == "tools", rel == "examples", rel == "internal",
		base == "testdata", base == "doormanpb",
		strings.HasPrefix(base, "."), strings.HasPrefix(base, "_"):
		return true
	}
	return false
}

type field struct {
	name, typ, doc string
}

type method struct {
	pointer bool
	sig     string
}

type structType struct {
	pkg     string // import path relative to the module ("busy", "leasing/server")
	pkgName string
	name    string
	doc     string
	fields  []field
	methods map[string]method
	pos     string
}

func (s *structType) key() string { return s.pkg + "." + s.name }

// library parses every non-test Go file of the library's packages and
// returns their exported struct types, keyed by "pkg.Name".
func library(t *testing.T) map[string]*structType {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]*structType{}
	methods := map[string]map[string]method{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); rel != "." && err == nil {
				return filepath.SkipDir // a module of its own (prometheus/), not the library
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if f.Name.Name == "main" {
			return nil
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() || ts.Assign != 0 {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					doc := ts.Doc.Text()
					if doc == "" {
						doc = decl.Doc.Text()
					}
					s := &structType{pkg: pkg, pkgName: f.Name.Name, name: ts.Name.Name, doc: doc, pos: fset.Position(ts.Pos()).String()}
					for _, fl := range st.Fields.List {
						doc := fl.Doc.Text() + fl.Comment.Text()
						typ := exprString(fset, fl.Type)
						if len(fl.Names) == 0 { // embedded
							s.fields = append(s.fields, field{name: strings.TrimPrefix(typ, "*"), typ: typ, doc: doc})
						}
						for _, n := range fl.Names {
							if n.IsExported() {
								s.fields = append(s.fields, field{name: n.Name, typ: typ, doc: doc})
							}
						}
					}
					types[s.key()] = s
				}
			case *ast.FuncDecl:
				if decl.Recv == nil || len(decl.Recv.List) != 1 {
					continue
				}
				rt := decl.Recv.List[0].Type
				_, ptr := rt.(*ast.StarExpr)
				if ptr {
					rt = rt.(*ast.StarExpr).X
				}
				id, ok := rt.(*ast.Ident)
				if !ok {
					continue
				}
				k := pkg + "." + id.Name
				if methods[k] == nil {
					methods[k] = map[string]method{}
				}
				methods[k][decl.Name.Name] = method{pointer: ptr, sig: exprString(fset, decl.Type)}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range types {
		s.methods = methods[k]
	}
	return types
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b bytes.Buffer
	if err := format.Node(&b, fset, e); err != nil {
		return fmt.Sprint(err)
	}
	return b.String()
}

// configs returns the library's configuration types (see configName),
// sorted by key.
func configs(t *testing.T, types map[string]*structType) []*structType {
	t.Helper()
	// byName resolves a field's type expression within pkg to a struct
	// type of the library.
	pkgOf := map[string]string{} // package name -> pkg, for qualified field types
	for _, s := range types {
		pkgOf[s.pkgName] = s.pkg
	}
	// Fields that point to a struct hold a running object (a Pool, a
	// Recorder), not more configuration: only values are followed.
	resolve := func(pkg, typ string) *structType {
		if strings.Contains(typ, "*") {
			return nil
		}
		typ = strings.TrimLeft(typ, "[]")
		if strings.HasPrefix(typ, "map[") {
			if i := strings.Index(typ, "]"); i >= 0 {
				typ = strings.TrimLeft(typ[i+1:], "*")
			}
		}
		if q, name, ok := strings.Cut(typ, "."); ok {
			return types[pkgOf[q]+"."+name]
		}
		return types[pkg+"."+typ]
	}
	set := map[string]*structType{}
	var add func(s *structType)
	add = func(s *structType) {
		if _, skip := notConfig[s.key()]; skip || set[s.key()] != nil {
			return
		}
		set[s.key()] = s
		for _, f := range s.fields {
			if fs := resolve(s.pkg, f.typ); fs != nil {
				add(fs)
			}
		}
	}
	for _, s := range types {
		_, v1 := s.methods["Validate"]
		_, v2 := s.methods["validate"]
		// A struct without exported fields is a running object (a token
		// budget, say), not something a user fills in.
		if (configName.MatchString(s.name) || v1 || v2) && len(s.fields) > 0 {
			add(s)
		}
	}
	for k := range notConfig {
		if types[k] == nil {
			t.Errorf("notConfig names %s, which is not an exported struct type of the library any more: remove it", k)
		}
	}
	out := make([]*structType, 0, len(set))
	for _, s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// generated returns the text of configs_gen_test.go for cs: a zero value
// of every configuration type, so that the test can call its methods.
func generated(cs []*structType) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by go test ./internal/apiconv -update; DO NOT EDIT.\n\npackage apiconv_test\n\nimport (\n")
	alias := map[string]string{}
	used := map[string]bool{}
	for _, s := range cs {
		if _, ok := alias[s.pkg]; ok {
			continue
		}
		a := s.pkgName
		for i := 2; used[a]; i++ {
			a = fmt.Sprintf("%s%d", s.pkgName, i)
		}
		used[a] = true
		alias[s.pkg] = a
	}
	pkgs := make([]string, 0, len(alias))
	for p := range alias {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Fprintf(&b, "\t%s %q\n", alias[p], module+"/"+p)
	}
	b.WriteString(")\n\n// zeros holds the zero value of every configuration type of the library.\nvar zeros = map[string]any{\n")
	for _, s := range cs {
		fmt.Fprintf(&b, "\t%q: %s.%s{},\n", s.key(), alias[s.pkg], s.name)
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		panic(err)
	}
	return out
}

// TestRegistryIsCurrent checks that zeros (configs_gen_test.go) holds
// exactly the configuration types the source declares, so that a new one is
// checked by the tests below as soon as it is written.
func TestRegistryIsCurrent(t *testing.T) {
	want := generated(configs(t, library(t)))
	if *update {
		if err := os.WriteFile("configs_gen_test.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("configs_gen_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("configs_gen_test.go is not the library's list of configuration types: run go test ./internal/apiconv -update\nwant:\n%s", want)
	}
}

// negativeSentinel finds, in a doc comment, a sentence that gives a
// negative value a meaning ("a negative value turns it off", "negative,
// none") rather than calling it invalid.
func negativeSentinel(doc string) string {
	for _, sentence := range regexp.MustCompile(`[.;]\s`).Split(strings.Join(strings.Fields(doc), " "), -1) {
		l := strings.ToLower(sentence)
		if !strings.Contains(l, "negative") && !strings.Contains(l, "< 0 means") && !strings.Contains(l, "-1 means") {
			continue
		}
		if strings.Contains(l, "must not be negative") || strings.Contains(l, "non-negative") ||
			strings.Contains(l, "cannot be negative") || strings.Contains(l, "never negative") {
			continue
		}
		return sentence
	}
	return ""
}

// fieldExceptions are fields that break one of the static rules below on
// purpose, each with the reason.
var fieldExceptions = map[string]string{
	// gRPC's retryPolicy, field for field (gRFC A6); Policy.Backoff()
	// returns the backoff.Exponential every wait is drawn from.
	"retry.Policy.InitialBackoff":    "gRPC's retryPolicy field",
	"retry.Policy.MaxBackoff":        "gRPC's retryPolicy field",
	"retry.Policy.BackoffMultiplier": "gRPC's retryPolicy field",
}

// TestStaticConventions checks what the source says: an exported
// value-receiver Validate() error and no unexported validate, no negative
// sentinels, one way to take time, randomness, backoff and metrics.
func TestStaticConventions(t *testing.T) {
	for _, s := range configs(t, library(t)) {
		t.Run(s.key(), func(t *testing.T) {
			v, ok := s.methods["Validate"]
			switch {
			case !ok:
				t.Errorf("%s has no Validate method: want func (%s) Validate() error", s.key(), s.name)
			case v.pointer:
				t.Errorf("%s.Validate has a pointer receiver: want a value receiver, so that a value and a pointer both validate", s.key())
			case v.sig != "func() error":
				t.Errorf("%s.Validate is %s: want func() error", s.key(), v.sig)
			}
			if _, ok := s.methods["validate"]; ok {
				t.Errorf("%s has an unexported validate: export it as Validate() error", s.key())
			}
			if m := negativeSentinel(s.doc); m != "" {
				t.Errorf("%s gives a negative value a meaning (%q): make it an explicit field (a bool or a named mode) whose zero is the default", s.key(), m)
			}
			for _, f := range s.fields {
				if m := negativeSentinel(f.doc); m != "" {
					t.Errorf("%s.%s gives a negative value a meaning (%q): make it an explicit field (a bool or a named mode) whose zero is the default", s.key(), f.name, m)
				}
				if _, ok := fieldExceptions[s.key()+"."+f.name]; ok {
					continue
				}
				switch {
				case f.typ == "clock.Clock" && f.name != "Clock",
					f.name == "Clock" && f.typ != "clock.Clock",
					strings.Contains(f.typ, "func() time.Time"):
					t.Errorf("%s.%s (%s): time comes through a field Clock clock.Clock, nil meaning the real clock", s.key(), f.name, f.typ)
				case f.name == "Rand" && f.typ != "func() float64",
					strings.Contains(f.typ, "rand.Rand"), strings.Contains(f.typ, "rand.Source"):
					t.Errorf("%s.%s (%s): randomness comes through a field Rand func() float64, nil meaning math/rand/v2's Float64", s.key(), f.name, f.typ)
				case strings.Contains(f.name, "Backoff") && f.typ != "backoff.Exponential":
					t.Errorf("%s.%s (%s): a backoff is a backoff.Exponential", s.key(), f.name, f.typ)
				case strings.Contains(f.typ, "Recorder"), f.name == "Recorder",
					f.name == "Scope" && f.typ != "tally.Scope":
					t.Errorf("%s.%s (%s): metrics go to a field Scope tally.Scope, nil meaning tally.NoopScope", s.key(), f.name, f.typ)
				case f.typ == "*slog.Logger" && f.name != "Logger",
					f.name == "Logger" && f.typ != "*slog.Logger",
					strings.HasPrefix(f.name, "Log") && f.name != "Logger",
					strings.HasPrefix(f.name, "On") && strings.HasSuffix(f.name, "Error"):
					t.Errorf("%s.%s (%s): lines go to a field Logger *slog.Logger, nil meaning slog.Default(); a callback is for a program that must act on an event, not log it", s.key(), f.name, f.typ)
				}
			}
		})
	}
}

// required lists the configurations whose zero value cannot be valid,
// with the field their zero value's error must name and why. Each names
// what to talk to or which policy to follow, something no default can
// stand for; every other field of theirs has a default.
var required = map[string]string{
	// gRPC's retryPolicy, hedgingPolicy and retryThrottling (gRFC A6)
	// have no defaults: a policy is written out whole, and
	// serviceconfig.Parse names the missing JSON field.
	"retry.Policy":          "Policy.MaxAttempts",
	"retry.ThrottleConfig":  "ThrottleConfig.MaxTokens",
	"hedge.Policy":          "Policy.MaxAttempts",
	"hedge.Adaptive":        "Adaptive.Quantile", // as a policy's adaptiveDelay: quantile, window, floor and cap are required
	"leasing.ClientConfig":  "ClientConfig.Addr", // the Doorman server
	"discovery/dns.Config":  "Config.Target",     // the name to resolve
	"discovery/file.Config": "Config.Path",       // the file to read
	// The etcd client to read or write through.
	"discovery/etcd.ResolverConfig":      "ResolverConfig.Client",
	"discovery/etcd.RegistrarConfig":     "RegistrarConfig.Client",
	"leasing/server/etcdelection.Config": "Config.Endpoints",
	// The resources a root Doorman server hands out.
	"leasing/server.Config": "Config.Repository",
	// The resolver to run and the function to hand its sets to.
	// The TLS configuration: a Channel without TLS takes no ServerTLS or
	// ClientTLS at all.
	"channel.ServerTLS": "ServerTLS.Config",
	"channel.ClientTLS": "ClientTLS.Config",
}

// validator is the method every configuration has.
type validator interface{ Validate() error }

// TestZeroValid checks that the zero value of every configuration validates
// (zero means the defaults), or, for those in required, fails naming the
// required field.
func TestZeroValid(t *testing.T) {
	for k := range required {
		if _, ok := zeros[k]; !ok {
			t.Errorf("required names %s, which is not a configuration type any more: remove it", k)
		}
	}
	for _, k := range sortedKeys() {
		v, ok := zeros[k].(validator)
		if !ok {
			t.Errorf("%s has no value-receiver Validate() error", k)
			continue
		}
		err := v.Validate()
		field, req := required[k]
		switch {
		case !req && err != nil:
			t.Errorf("%s{}.Validate() = %v, want nil: the zero value is the defaults", k, err)
		case req && err == nil:
			t.Errorf("%s{}.Validate() = nil, but required says it needs %s: remove it from required", k, field)
		case req:
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Field != field {
				t.Errorf("%s{}.Validate() = %v, want a FieldError naming %s", k, err, field)
			}
		}
	}
}

// TestBadFields sets each numeric field of every configuration (nested ones
// included) to -1 alone, and checks that an error, if any, is a FieldError
// naming a Go field of the type and reading "pkg: Field is Value, Rule".
// Where the zero value is valid the field named must be the one set, or,
// for a nested struct whose fields go together (a backoff.Exponential),
// one beside it.
func TestBadFields(t *testing.T) {
	for _, k := range sortedKeys() {
		if _, ok := reflect.New(reflect.TypeOf(zeros[k])).Interface().(validator); !ok {
			continue // TestZeroValid reports it
		}
		typ := reflect.TypeOf(zeros[k])
		for _, path := range numericLeaves(typ, nil, 0) {
			v := reflect.New(typ).Elem()
			setPath(v, path, -1)
			err := v.Addr().Interface().(validator).Validate()
			if err == nil {
				continue
			}
			name := typ.Name() + "." + strings.Join(path, ".")
			if _, req := required[k]; req {
				name = "" // the required field's error may come first
			}
			checkFieldError(t, k, name, typ, err, whole[key(parentType(typ, path))])
		}
	}
}

// TestDeterministicErrors fills every configuration with bad values at
// once (every numeric field -1, maps and slices given several bad
// entries) and checks that 200 calls of Validate give one message.
func TestDeterministicErrors(t *testing.T) {
	for _, k := range sortedKeys() {
		if _, ok := reflect.New(reflect.TypeOf(zeros[k])).Interface().(validator); !ok {
			continue // TestZeroValid reports it
		}
		typ := reflect.TypeOf(zeros[k])
		for _, variant := range []struct {
			name    string
			numbers bool
		}{{"all fields bad", true}, {"collections bad", false}} {
			v := reflect.New(typ).Elem()
			fillBad(v, variant.numbers, 0)
			val := v.Addr().Interface().(validator)
			msgs := map[string]bool{}
			for range 200 {
				if err := val.Validate(); err != nil {
					msgs[err.Error()] = true
				} else {
					msgs["<nil>"] = true
				}
			}
			if len(msgs) > 1 {
				t.Errorf("%s (%s): Validate gave %d different answers in 200 calls, want 1: %v", k, variant.name, len(msgs), sortedSet(msgs))
			}
			if err := val.Validate(); err != nil {
				checkFieldError(t, k, "", typ, err, false)
			}
		}
	}
}

// checkFieldError checks that err is a *config.FieldError naming a Go field
// of typ (want, when given, or when sibling one beside it), whose message
// is the FieldError's own.
func checkFieldError(t *testing.T, k, want string, typ reflect.Type, err error, sibling bool) {
	t.Helper()
	var fe *config.FieldError
	if !errors.As(err, &fe) {
		t.Errorf("%s: setting %s gives %T %q, want a *config.FieldError (retry.FieldError) naming the field and the rule", k, orAll(want), err, err)
		return
	}
	if err.Error() != fe.Error() {
		t.Errorf("%s: error %q wraps the FieldError %q: return it as it is", k, err, fe)
	}
	if !resolves(typ, fe.Field) {
		t.Errorf("%s: setting %s gives %q, whose Field %q is not a Go field path of %s", k, orAll(want), err, fe.Field, typ.Name())
		return
	}
	if want != "" && !namesField(stripIndex(fe.Field), stripIndex(want), sibling) {
		t.Errorf("%s: setting %s gives %q, naming another field", k, want, err)
	}
	if fe.Package == "" || fe.Rule == "" || fe.Value == "" {
		t.Errorf("%s: FieldError %#v leaves Package, Value or Rule empty", k, *fe)
	}
}

// whole lists the configurations that are set whole or left zero (for
// their holder's default): one field set alone breaks the rule of another.
var whole = map[string]bool{
	"backoff.Exponential": true, // a zero one means the holder's default backoff
	"channel.HealthCheck": true, // a zero one means the default health check
}

// namesField reports whether got, the field an error names, is want, the
// field that was set, or, when sibling, a field beside it.
func namesField(got, want string, sibling bool) bool {
	if got == want {
		return true
	}
	parent := want[:strings.LastIndex(want, ".")]
	return sibling && strings.HasPrefix(got, parent+".")
}

// key returns t's key in zeros ("busy.Config").
func key(t reflect.Type) string {
	return strings.TrimPrefix(t.PkgPath(), module+"/") + "." + t.Name()
}

// parentType returns the type of the struct holding the field at path.
func parentType(typ reflect.Type, path []string) reflect.Type {
	for _, s := range path[:len(path)-1] {
		f, _ := typ.FieldByName(s)
		typ = f.Type
	}
	return typ
}

func orAll(s string) string {
	if s == "" {
		return "every field to a bad value"
	}
	return s + " to -1"
}

var index = regexp.MustCompile(`\[[^\]]*\]`)

func stripIndex(s string) string { return index.ReplaceAllString(s, "") }

// resolves reports whether path ("Config.A.B[x].C") names a field of typ.
func resolves(typ reflect.Type, path string) bool {
	segs := strings.Split(stripIndex(path), ".")
	if len(segs) < 2 || segs[0] != typ.Name() {
		return false
	}
	cur := typ
	for _, s := range segs[1:] {
		for cur.Kind() == reflect.Pointer || cur.Kind() == reflect.Slice || cur.Kind() == reflect.Map || cur.Kind() == reflect.Array {
			cur = cur.Elem()
		}
		if cur.Kind() != reflect.Struct {
			return false
		}
		f, ok := cur.FieldByName(s)
		if !ok || !f.IsExported() {
			return false
		}
		cur = f.Type
	}
	return true
}

// numericLeaves returns the paths of the signed numeric fields of typ,
// descending into struct fields (not pointers or collections).
func numericLeaves(typ reflect.Type, prefix []string, depth int) [][]string {
	var out [][]string
	if depth > 4 {
		return nil
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		p := append(append([]string(nil), prefix...), f.Name)
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float32, reflect.Float64:
			out = append(out, p)
		case reflect.Struct:
			if f.Type.PkgPath() == "time" {
				continue
			}
			out = append(out, numericLeaves(f.Type, p, depth+1)...)
		}
	}
	return out
}

func setPath(v reflect.Value, path []string, n int64) {
	for _, s := range path {
		v = v.FieldByName(s)
	}
	setNumber(v, n)
}

func setNumber(v reflect.Value, n int64) {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n))
	default:
		v.SetInt(n)
	}
}

// fillBad sets v's numeric fields to -1 and its strings to an address
// (when numbers) and gives its maps
// and slices of structs several entries filled likewise (always with
// numbers), recursively.
func fillBad(v reflect.Value, numbers bool, depth int) {
	if depth > 4 {
		return
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float32, reflect.Float64:
		if numbers {
			setNumber(v, -1)
		}
	case reflect.String:
		if numbers { // a plausible address, so that checks of emptiness pass
			v.SetString("127.0.0.1:1")
		}
	case reflect.Struct:
		if v.Type().PkgPath() == "time" {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillBad(v.Field(i), numbers, depth+1)
			}
		}
	case reflect.Map:
		kt, et := v.Type().Key(), v.Type().Elem()
		if kt.Kind() != reflect.String || (et.Kind() != reflect.Struct && !isNumber(et)) {
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := range 8 {
			e := reflect.New(et).Elem()
			fillBad(e, true, depth+1)
			m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", i)).Convert(kt), e)
		}
		v.Set(m)
	case reflect.Slice:
		et := v.Type().Elem()
		if et.Kind() != reflect.Struct {
			return
		}
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			fillBad(s.Index(i), true, depth+1)
		}
		v.Set(s)
	}
}

func isNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func sortedKeys() []string {
	ks := make([]string, 0, len(zeros))
	for k := range zeros {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
