package main

import (
	"fmt"
	"go/token"
	"go/types"
	"maps"
	"slices"
	"strings"
)

// features returns the exported API of pkg as sorted lines in the Go
// project's api-file style, each prefixed "pkg <import path>, ". Types of
// other packages are qualified by package name; byte and rune are uint8
// and int32, untyped constants ideal-int...; type parameters are written
// by index ($0) and parameter names never appear. A struct's fields
// promoted through an unexported embedded struct are marked "// promoted".
func features(pkg *types.Package) []string {
	e := &emitter{pkg: pkg, seen: map[string]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		if !token.IsExported(name) {
			continue
		}
		e.object(scope.Lookup(name))
	}
	slices.Sort(e.lines)
	return e.lines
}

type emitter struct {
	pkg   *types.Package
	lines []string
	seen  map[string]bool
}

// emit adds one line under scope ("type T struct"), if not empty.
func (e *emitter) emit(scope, format string, args ...any) {
	line := "pkg " + e.pkg.Path() + ", "
	if scope != "" {
		line += scope + ", "
	}
	line += fmt.Sprintf(format, args...)
	if strings.Contains(line, "\n") {
		panic("apifiles: a feature line holds a newline: " + line)
	}
	if e.seen[line] {
		panic("apifiles: a feature line twice: " + line)
	}
	e.seen[line] = true
	e.lines = append(e.lines, line)
}

func (e *emitter) object(obj types.Object) {
	switch obj := obj.(type) {
	case *types.Const:
		e.emit("", "const %s %s", obj.Name(), e.typeString(obj.Type()))
		value := obj.Val().String() // shortened if long
		if exact := obj.Val().ExactString(); exact != value {
			value += "  // " + exact
		}
		e.emit("", "const %s = %s", obj.Name(), value)
	case *types.Var:
		e.emit("", "var %s %s", obj.Name(), e.typeString(obj.Type()))
	case *types.Func:
		e.emit("", "func %s%s", obj.Name(), e.signatureString(obj.Signature()))
	case *types.TypeName:
		e.typeName(obj)
	default:
		panic(fmt.Sprintf("apifiles: unknown object %T: %v", obj, obj))
	}
}

func (e *emitter) typeName(obj *types.TypeName) {
	name := obj.Name()
	if obj.IsAlias() {
		e.emit("", "type %s = %s", name, e.typeString(obj.Type()))
		return
	}
	named := obj.Type().(*types.Named)
	name += e.typeParams(named.TypeParams(), true)
	switch u := named.Underlying().(type) {
	case *types.Struct:
		e.structType(name, named, u)
	case *types.Interface:
		e.interfaceType(name, u)
		return // an interface's methods are its lines above
	default:
		e.emit("", "type %s %s", name, e.typeString(u))
	}
	e.methods(named)
}

func (e *emitter) structType(name string, named *types.Named, st *types.Struct) {
	scope := "type " + name + " struct"
	e.emit("", "%s", scope)
	for i := range st.NumFields() {
		switch f := st.Field(i); {
		case !f.Exported():
		case f.Anonymous():
			e.emit(scope, "embedded %s", e.typeString(f.Type()))
		default:
			e.emit(scope, "%s %s", f.Name(), e.typeString(f.Type()))
		}
	}
	// Fields promoted through unexported embedded structs: Go's lookup
	// says which of their exported fields are reachable (and which of
	// the names collected are st's own, at index length 1).
	candidates := map[string]bool{}
	var collect func(s *types.Struct, depth int)
	collect = func(s *types.Struct, depth int) {
		if depth > 8 {
			return
		}
		for i := range s.NumFields() {
			f := s.Field(i)
			if f.Exported() && !f.Anonymous() {
				candidates[f.Name()] = true
			}
			if f.Anonymous() && !f.Exported() {
				if inner, ok := derefStruct(f.Type()); ok {
					collect(inner, depth+1)
				}
			}
		}
	}
	collect(st, 0)
	for _, fname := range slices.Sorted(maps.Keys(candidates)) {
		obj, index, _ := types.LookupFieldOrMethod(named, true, e.pkg, fname)
		v, ok := obj.(*types.Var)
		if !ok || !v.IsField() || len(index) < 2 {
			continue
		}
		e.emit(scope, "%s %s // promoted", fname, e.typeString(v.Type()))
	}
}

func (e *emitter) interfaceType(name string, it *types.Interface) {
	scope := "type " + name + " interface"
	var names []string
	complete := true
	mset := types.NewMethodSet(it)
	for i := range mset.Len() {
		m := mset.At(i).Obj().(*types.Func)
		if !m.Exported() {
			complete = false
			continue
		}
		names = append(names, m.Name())
		e.emit(scope, "%s%s", m.Name(), e.signatureString(m.Signature()))
	}
	if embeds := e.constraintTerms(it); len(embeds) > 0 {
		e.emit(scope, "%s", strings.Join(embeds, ", "))
	}
	if !complete {
		e.emit(scope, "unexported methods")
		return
	}
	slices.Sort(names)
	if len(names) == 0 {
		e.emit("", "type %s interface {}", name)
		return
	}
	e.emit("", "type %s interface { %s }", name, strings.Join(names, ", "))
}

// methods emits the exported methods of T and *T, promoted ones too.
func (e *emitter) methods(named *types.Named) {
	done := map[string]bool{}
	for _, recv := range []types.Type{named, types.NewPointer(named)} {
		mset := types.NewMethodSet(recv)
		for i := range mset.Len() {
			sel := mset.At(i)
			m := sel.Obj()
			if !m.Exported() || done[m.Name()] {
				continue
			}
			done[m.Name()] = true
			sig := sel.Type().(*types.Signature)
			e.emit("", "method (%s) %s%s", e.typeString(sig.Recv().Type()), m.Name(), e.signatureString(sig))
		}
	}
}

func derefStruct(t types.Type) (*types.Struct, bool) {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	s, ok := t.Underlying().(*types.Struct)
	return s, ok
}

// constraintTerms returns the type-set terms an interface embeds, sorted.
func (e *emitter) constraintTerms(it *types.Interface) []string {
	var terms []string
	for i := range it.NumEmbeddeds() {
		switch emb := types.Unalias(it.EmbeddedType(i)).(type) {
		case *types.Union:
			union := make([]string, emb.Len())
			for j := range union {
				union[j] = e.typeString(emb.Term(j).Type())
				if emb.Term(j).Tilde() {
					union[j] = "~" + union[j]
				}
			}
			terms = append(terms, strings.Join(union, " | "))
		default:
			if inner, ok := emb.Underlying().(*types.Interface); ok {
				terms = append(terms, e.constraintTerms(inner)...)
			} else { // a single embedded non-interface type (interface{ int })
				terms = append(terms, e.typeString(emb))
			}
		}
	}
	slices.Sort(terms)
	return terms
}

// basicNames are the Go project's names of basic types whose name differs;
// byte and rune are uint8 and int32.
var basicNames = map[types.BasicKind]string{
	types.UnsafePointer:  "unsafe.Pointer",
	types.UntypedBool:    "ideal-bool",
	types.UntypedInt:     "ideal-int",
	types.UntypedRune:    "ideal-char",
	types.UntypedFloat:   "ideal-float",
	types.UntypedComplex: "ideal-complex",
	types.UntypedString:  "ideal-string",
	types.Uint8:          "uint8",
	types.Int32:          "int32",
}

var chanDirs = map[types.ChanDir]string{types.SendRecv: "chan ", types.SendOnly: "chan<- ", types.RecvOnly: "<-chan "}

func (e *emitter) typeString(t types.Type) string {
	switch t := t.(type) {
	case *types.Basic:
		if s, ok := basicNames[t.Kind()]; ok {
			return s
		}
		return t.Name()
	case *types.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), e.typeString(t.Elem()))
	case *types.Slice:
		return "[]" + e.typeString(t.Elem())
	case *types.Struct:
		// Spelled out, unexported fields too: all make its identity.
		fields := make([]string, t.NumFields())
		for i := range fields {
			f := t.Field(i)
			fields[i] = e.typeString(f.Type())
			if !f.Anonymous() {
				fields[i] = f.Name() + " " + fields[i]
			}
		}
		return braced("struct", fields)
	case *types.Pointer:
		return "*" + e.typeString(t.Elem())
	case *types.Signature:
		return "func" + e.signatureString(t)
	case *types.Interface:
		var methods []string
		for i := range t.NumMethods() {
			m := t.Method(i)
			methods = append(methods, m.Name()+e.signatureString(m.Signature()))
		}
		slices.Sort(methods)
		return braced("interface", append(methods, e.constraintTerms(t)...))
	case *types.Map:
		return "map[" + e.typeString(t.Key()) + "]" + e.typeString(t.Elem())
	case *types.Chan:
		return chanDirs[t.Dir()] + e.typeString(t.Elem())
	case *types.Alias:
		return e.typeString(types.Unalias(t))
	case *types.Named:
		name := t.Obj().Name()
		if pkg := t.Obj().Pkg(); pkg != nil && pkg != e.pkg {
			name = pkg.Name() + "." + name
		}
		if targs := t.TypeArgs(); targs.Len() > 0 {
			args := make([]string, targs.Len())
			for i := range args {
				args[i] = e.typeString(targs.At(i))
			}
			return name + "[" + strings.Join(args, ", ") + "]"
		}
		return name + e.typeParams(t.TypeParams(), false) // a generic type's own receiver: (*T[$0])
	case *types.TypeParam:
		return fmt.Sprintf("$%d", t.Index())
	}
	panic(fmt.Sprintf("apifiles: unknown type %T", t)) // a tuple too: params writes those
}

// braced writes a struct's fields or an interface's elements: "struct{}",
// "interface{ A(); B() }".
func braced(kind string, elems []string) string {
	if len(elems) == 0 {
		return kind + "{}"
	}
	return kind + "{ " + strings.Join(elems, "; ") + " }"
}

func (e *emitter) signatureString(sig *types.Signature) string {
	s := e.typeParams(sig.TypeParams(), true) + e.params(sig.Params(), sig.Variadic())
	switch res := sig.Results(); res.Len() {
	case 0:
		return s
	case 1:
		return s + " " + e.typeString(res.At(0).Type())
	default:
		return s + " " + e.params(res, false)
	}
}

// typeParams writes a list of type parameters, with their constraints or
// without: "[$0 any, $1 comparable]", "[$0, $1]"; "" for none.
func (e *emitter) typeParams(tparams *types.TypeParamList, constraints bool) string {
	if tparams.Len() == 0 {
		return ""
	}
	list := make([]string, tparams.Len())
	for i := range list {
		list[i] = e.typeString(tparams.At(i))
		if constraints {
			list[i] += " " + e.typeString(tparams.At(i).Constraint())
		}
	}
	return "[" + strings.Join(list, ", ") + "]"
}

func (e *emitter) params(t *types.Tuple, variadic bool) string {
	list := make([]string, t.Len())
	for i := range list {
		if typ := t.At(i).Type(); variadic && i == len(list)-1 {
			list[i] = "..." + e.typeString(typ.(*types.Slice).Elem())
		} else {
			list[i] = e.typeString(typ)
		}
	}
	return "(" + strings.Join(list, ", ") + ")"
}
