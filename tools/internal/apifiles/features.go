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
		short, exact := obj.Val().String(), obj.Val().ExactString()
		if short == exact {
			e.emit("", "const %s = %s", obj.Name(), short)
		} else {
			e.emit("", "const %s = %s  // %s", obj.Name(), short, exact)
		}
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
	if tparams := named.TypeParams(); tparams.Len() > 0 {
		var b strings.Builder
		b.WriteString(name)
		e.writeTypeParams(&b, tparams, true)
		name = b.String()
	}
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
	var hidden []*types.Struct // unexported embedded structs, whose fields are promoted
	for i := range st.NumFields() {
		f := st.Field(i)
		if f.Anonymous() && !f.Exported() {
			if s, ok := derefStruct(f.Type()); ok {
				hidden = append(hidden, s)
			}
			continue
		}
		if !f.Exported() {
			continue
		}
		if f.Anonymous() {
			e.emit(scope, "embedded %s", e.typeString(f.Type()))
			continue
		}
		e.emit(scope, "%s %s", f.Name(), e.typeString(f.Type()))
	}
	// Fields promoted through unexported embedded structs: Go's lookup
	// says which of their exported fields are reachable.
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
	for _, s := range hidden {
		collect(s, 1)
	}
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
			var b strings.Builder
			for j := range emb.Len() {
				if j > 0 {
					b.WriteString(" | ")
				}
				if emb.Term(j).Tilde() {
					b.WriteByte('~')
				}
				e.writeType(&b, emb.Term(j).Type())
			}
			terms = append(terms, b.String())
		case *types.Interface:
			terms = append(terms, e.constraintTerms(emb)...)
		case *types.Named:
			if inner, ok := emb.Underlying().(*types.Interface); ok {
				terms = append(terms, e.constraintTerms(inner)...)
				break
			}
			terms = append(terms, e.typeString(emb))
		default:
			// A single embedded non-interface type (interface{ int }).
			var b strings.Builder
			e.writeType(&b, emb)
			terms = append(terms, b.String())
		}
	}
	slices.Sort(terms)
	return terms
}

func (e *emitter) typeString(t types.Type) string {
	var b strings.Builder
	e.writeType(&b, t)
	return b.String()
}

func (e *emitter) signatureString(sig *types.Signature) string {
	var b strings.Builder
	e.writeSignature(&b, sig)
	return b.String()
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

func (e *emitter) writeType(b *strings.Builder, t types.Type) {
	switch t := t.(type) {
	case *types.Basic:
		s, ok := basicNames[t.Kind()]
		if !ok {
			s = t.Name()
		}
		b.WriteString(s)
	case *types.Array:
		fmt.Fprintf(b, "[%d]", t.Len())
		e.writeType(b, t.Elem())
	case *types.Slice:
		b.WriteString("[]")
		e.writeType(b, t.Elem())
	case *types.Struct:
		// Spelled out, unexported fields too: all make its identity.
		b.WriteString("struct{")
		for i := range t.NumFields() {
			f := t.Field(i)
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString("; ")
			}
			if !f.Anonymous() {
				b.WriteString(f.Name() + " ")
			}
			e.writeType(b, f.Type())
		}
		if t.NumFields() > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	case *types.Pointer:
		b.WriteByte('*')
		e.writeType(b, t.Elem())
	case *types.Signature:
		b.WriteString("func")
		e.writeSignature(b, t)
	case *types.Interface:
		var parts []string
		for i := range t.NumMethods() {
			m := t.Method(i)
			parts = append(parts, m.Name()+e.signatureString(m.Signature()))
		}
		slices.Sort(parts)
		parts = append(parts, e.constraintTerms(t)...)
		b.WriteString("interface{")
		if len(parts) > 0 {
			b.WriteString(" " + strings.Join(parts, "; ") + " ")
		}
		b.WriteByte('}')
	case *types.Map:
		b.WriteString("map[")
		e.writeType(b, t.Key())
		b.WriteByte(']')
		e.writeType(b, t.Elem())
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			b.WriteString("chan<- ")
		case types.RecvOnly:
			b.WriteString("<-chan ")
		default:
			b.WriteString("chan ")
		}
		e.writeType(b, t.Elem())
	case *types.Alias:
		e.writeType(b, types.Unalias(t))
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() != nil && obj.Pkg() != e.pkg {
			b.WriteString(obj.Pkg().Name() + ".")
		}
		b.WriteString(obj.Name())
		if targs := t.TypeArgs(); targs.Len() > 0 {
			b.WriteByte('[')
			for i := range targs.Len() {
				if i > 0 {
					b.WriteString(", ")
				}
				e.writeType(b, targs.At(i))
			}
			b.WriteByte(']')
		} else if tparams := t.TypeParams(); tparams.Len() > 0 {
			// A generic type's own receiver: (*T[$0]).
			e.writeTypeParams(b, tparams, false)
		}
	case *types.TypeParam:
		fmt.Fprintf(b, "$%d", t.Index())
	case *types.Tuple:
		panic("apifiles: a tuple outside a signature")
	default:
		panic(fmt.Sprintf("apifiles: unknown type %T", t))
	}
}

func (e *emitter) writeSignature(b *strings.Builder, sig *types.Signature) {
	if tparams := sig.TypeParams(); tparams.Len() > 0 {
		e.writeTypeParams(b, tparams, true)
	}
	e.writeParams(b, sig.Params(), sig.Variadic())
	switch res := sig.Results(); res.Len() {
	case 0:
	case 1:
		b.WriteByte(' ')
		e.writeType(b, res.At(0).Type())
	default:
		b.WriteByte(' ')
		e.writeParams(b, res, false)
	}
}

func (e *emitter) writeTypeParams(b *strings.Builder, tparams *types.TypeParamList, constraints bool) {
	b.WriteByte('[')
	for i := range tparams.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		tp := tparams.At(i)
		e.writeType(b, tp)
		if constraints {
			b.WriteByte(' ')
			e.writeType(b, tp.Constraint())
		}
	}
	b.WriteByte(']')
}

func (e *emitter) writeParams(b *strings.Builder, t *types.Tuple, variadic bool) {
	b.WriteByte('(')
	for i := range t.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		typ := t.At(i).Type()
		if variadic && i == t.Len()-1 {
			b.WriteString("...")
			typ = typ.(*types.Slice).Elem()
		}
		e.writeType(b, typ)
	}
	b.WriteByte(')')
}
