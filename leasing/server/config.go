package server

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rpc/sluice/leasing/internal/wirenum"
)

// Kind names an algorithm that divides a resource's capacity between its
// clients. The values are those of the wire enum doorman.Algorithm.Kind.
type Kind int32

const (
	// NoAlgorithm gives every client what it wants (up to MaxCapacity)
	// and ignores capacity.
	NoAlgorithm Kind = 0
	// Static gives every client min(wants, capacity): the configured
	// capacity is a per-client ceiling, not a total.
	Static Kind = 1
	// ProportionalShare gives every client at least its equal share
	// (capacity / clients) if it wants it; capacity left by clients wanting
	// less is shared among the others in proportion to how far their wants
	// exceed the equal share.
	ProportionalShare Kind = 2
	// FairShare is max-min fair (water-filling): clients wanting less than
	// the level get what they want; the others get the level, chosen so
	// that the whole capacity is handed out.
	FairShare Kind = 3
)

var kindNames = [...]string{
	NoAlgorithm:       "NO_ALGORITHM",
	Static:            "STATIC",
	ProportionalShare: "PROPORTIONAL_SHARE",
	FairShare:         "FAIR_SHARE",
}

func (k Kind) valid() bool { return k >= 0 && int(k) < len(kindNames) }

// String returns the configuration name of k, e.g. "FAIR_SHARE".
func (k Kind) String() string {
	if k.valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

// parseKind returns the Kind named s ("NO_ALGORITHM", "STATIC",
// "PROPORTIONAL_SHARE" or "FAIR_SHARE").
func parseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if name == s {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm kind %q (want NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE or FAIR_SHARE, or their numbers 0 to 3)", s)
}

// Parameter is a named algorithm parameter. The built-in algorithms take
// none; parameters are kept so configurations of the original load.
type Parameter struct {
	// Name names the parameter.
	Name string
	// Value is the parameter's value, as text.
	Value string
}

// Algorithm configures how a resource's capacity is divided and the leases
// handed out for it.
type Algorithm struct {
	// Kind is the dividing algorithm.
	Kind Kind
	// LeaseLength is how long a lease lasts, in whole seconds (> 0, at most
	// 30 days, as is LearningModeDuration).
	LeaseLength int64
	// RefreshInterval is how often clients should renew, in whole seconds
	// (> 0 and <= LeaseLength).
	RefreshInterval int64
	// LearningModeDuration is how long after the server starts it hands
	// back what clients report they have, in seconds. Nil means
	// LeaseLength; 0 (or, as in the original, a negative value) means no
	// learning mode.
	LearningModeDuration *int64
	// Parameters are passed through; the built-in algorithms ignore them.
	Parameters []Parameter
}

// Template configures every resource whose identifier matches
// IdentifierGlob.
type Template struct {
	// IdentifierGlob is an exact identifier or a glob (path.Match syntax;
	// a lone "*" matches every identifier).
	IdentifierGlob string
	// Capacity is the total capacity (>= 0 and <= MaxCapacity); for
	// Static the per-client ceiling.
	Capacity float64
	// SafeCapacity is what clients in safe mode may use when they cannot
	// renew (<= MaxCapacity): negative means unlimited, 0 means block. Nil means dynamic:
	// capacity divided by the number of clients the server knows.
	SafeCapacity *float64
	// Description is free text shown on the status page.
	Description string
	// Algorithm divides the capacity.
	Algorithm Algorithm
}

// LearningDuration returns the learning mode duration the template asks
// for: LearningModeDuration if set (0 when negative), otherwise
// LeaseLength.
func (t *Template) LearningDuration() time.Duration {
	if d := t.Algorithm.LearningModeDuration; d != nil {
		return time.Duration(max(*d, 0)) * time.Second
	}
	return time.Duration(t.Algorithm.LeaseLength) * time.Second
}

// Validate reports the first thing wrong with t.
func (t *Template) Validate() error {
	if t.IdentifierGlob == "" {
		return errors.New("identifier_glob is empty, must name a resource or a glob")
	}
	if _, err := path.Match(t.IdentifierGlob, ""); err != nil {
		return fmt.Errorf("identifier_glob %q is not a valid glob: %v", t.IdentifierGlob, err)
	}
	if math.IsNaN(t.Capacity) || math.IsInf(t.Capacity, 0) || t.Capacity < 0 {
		return fmt.Errorf("capacity is %v, must be a finite number >= 0 (the original Doorman takes a negative one and hands out negative leases)", t.Capacity)
	}
	if t.Capacity > MaxCapacity {
		return fmt.Errorf("capacity is %v, must be <= %v (MaxCapacity)", t.Capacity, float64(MaxCapacity))
	}
	if t.SafeCapacity != nil && (math.IsNaN(*t.SafeCapacity) || math.IsInf(*t.SafeCapacity, 0)) {
		return fmt.Errorf("safe_capacity is %v, must be finite (negative means unlimited)", *t.SafeCapacity)
	}
	if t.SafeCapacity != nil && *t.SafeCapacity > MaxCapacity {
		return fmt.Errorf("safe_capacity is %v, must be <= %v (MaxCapacity; negative means unlimited)", *t.SafeCapacity, float64(MaxCapacity))
	}
	a := &t.Algorithm
	if !a.Kind.valid() {
		return fmt.Errorf("algorithm kind is %d, must be 0 to 3 (NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE, FAIR_SHARE)", int32(a.Kind))
	}
	if a.LeaseLength <= 0 || a.LeaseLength > maxLeaseLength {
		return fmt.Errorf("algorithm lease_length is %d, must be > 0 and <= %d seconds (30 days: a longer lease is a unit mistake, which the original Doorman would accept)", a.LeaseLength, int64(maxLeaseLength))
	}
	if a.RefreshInterval <= 0 || a.RefreshInterval > a.LeaseLength {
		return fmt.Errorf("algorithm refresh_interval is %d, must be > 0 and <= lease_length (%d)", a.RefreshInterval, a.LeaseLength)
	}
	if d := a.LearningModeDuration; d != nil && *d > maxLeaseLength {
		return fmt.Errorf("algorithm learning_mode_duration is %d, must be <= %d seconds (30 days)", *d, int64(maxLeaseLength))
	}
	return nil
}

// maxLeaseLength bounds lease_length and learning_mode_duration, in
// seconds. A lease is a promise about the near future: one that outlives
// a month is a misconfiguration (or a unit mistake), and the bound keeps
// every expiry far from time.Duration's range.
const maxLeaseLength = wirenum.MaxSeconds

// Repository is a resource repository (the original's
// ResourceRepository): the ordered list of templates a server matches
// resource identifiers against, exact identifier first, then globs in
// order; a "*" template must come last.
type Repository struct {
	// Resources are the templates, in matching order.
	Resources []Template
}

// Validate reports the first thing wrong with r, naming the template.
func (r *Repository) Validate() error {
	seen := make(map[string]int, len(r.Resources))
	for i := range r.Resources {
		t := &r.Resources[i]
		if err := t.Validate(); err != nil {
			return fmt.Errorf("server: template %d (%q): %w", i, t.IdentifierGlob, err)
		}
		if j, dup := seen[t.IdentifierGlob]; dup {
			return fmt.Errorf("server: template %d (%q): identifier_glob already used by template %d, so this one would never be used (the original Doorman accepts the dead copy)", i, t.IdentifierGlob, j)
		}
		seen[t.IdentifierGlob] = i
		if t.IdentifierGlob == "*" && i != len(r.Resources)-1 {
			return fmt.Errorf("server: template %d (%q): the \"*\" template must be the last one, but %d template(s) follow it", i, t.IdentifierGlob, len(r.Resources)-1-i)
		}
	}
	return nil
}

// named reports whether a template's identifier_glob is id itself: id
// is a configured resource.
func (r *Repository) named(id string) bool {
	for i := range r.Resources {
		if r.Resources[i].IdentifierGlob == id {
			return true
		}
	}
	return false
}

// Match returns the template for resource id: the first template whose
// identifier_glob equals id, otherwise the first whose glob matches it, or
// nil when none does.
func (r *Repository) Match(id string) *Template {
	for i := range r.Resources {
		if r.Resources[i].IdentifierGlob == id {
			return &r.Resources[i]
		}
	}
	for i := range r.Resources {
		g := r.Resources[i].IdentifierGlob
		if g == "*" {
			return &r.Resources[i]
		}
		if ok, _ := path.Match(g, id); ok {
			return &r.Resources[i]
		}
	}
	return nil
}

// ParseRepository reads a resource repository in the original Doorman's
// configuration format (YAML, or JSON, which is YAML too) and validates
// it. It accepts what the original's server accepts, with these
// exceptions, each refused with an error that names the rule:
//
//   - unknown fields (the original ignores them, so a misspelt field
//     silently takes its default);
//   - an algorithm without kind (the original takes NO_ALGORITHM, which
//     lifts the limit);
//   - a negative capacity, a lease or learning mode over 30 days, and a
//     duplicate identifier_glob (see Template.Validate and
//     Repository.Validate).
//
// Like the original it takes field names in any case, kind by name or by
// number ("kind: 2" is PROPORTIONAL_SHARE), integral numbers written as
// floats ("lease_length: 60.0"), a negative learning_mode_duration as no
// learning mode, and a template without an algorithm, which then takes the
// "*" template's algorithm (the design's mandatory default; there must be
// a "*" template, as the original requires).
func ParseRepository(data []byte) (*Repository, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("server: malformed configuration: %w", err)
	}
	repo := &Repository{}
	if len(doc.Content) == 0 {
		return repo, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("server: malformed configuration: line %d: the top level must be a mapping with a \"resources\" list", root.Line)
	}
	var templates *yaml.Node
	if err := fields("server: configuration", root, map[string]**yaml.Node{"resources": &templates}); err != nil {
		return nil, err
	}
	if templates == nil || isNull(templates) {
		return repo, nil
	}
	if templates.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("server: malformed configuration: line %d: resources must be a list of templates", templates.Line)
	}
	var noAlgorithm []int
	for i, node := range templates.Content {
		t, hasAlgorithm, err := parseTemplate(node)
		if err != nil {
			return nil, fmt.Errorf("server: template %d (%q): %w", i, t.IdentifierGlob, err)
		}
		if !hasAlgorithm {
			noAlgorithm = append(noAlgorithm, i)
		}
		repo.Resources = append(repo.Resources, t)
	}
	if len(noAlgorithm) > 0 {
		n := len(repo.Resources)
		if n == 0 || repo.Resources[n-1].IdentifierGlob != "*" || slices.Contains(noAlgorithm, n-1) {
			i := noAlgorithm[0]
			return nil, fmt.Errorf("server: template %d (%q): algorithm is missing, and there is no \"*\" template (last, with an algorithm) whose algorithm it could take as the default", i, repo.Resources[i].IdentifierGlob)
		}
		for _, i := range noAlgorithm {
			repo.Resources[i].Algorithm = repo.Resources[n-1].Algorithm
			repo.Resources[i].Algorithm.Parameters = append([]Parameter(nil), repo.Resources[n-1].Algorithm.Parameters...)
		}
	}
	if err := repo.Validate(); err != nil {
		return nil, err
	}
	return repo, nil
}

// LoadRepository reads and validates the resource repository in file (see
// ParseRepository).
func LoadRepository(file string) (*Repository, error) {
	data, err := ReadConfig(file)
	if err != nil {
		return nil, err
	}
	r, err := ParseRepository(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, file)
	}
	return r, nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// fields assigns the values of mapping m to the pointers named by their
// keys (matched regardless of case, as the original's JSON decoding does)
// and refuses any other key.
func fields(what string, m *yaml.Node, known map[string]**yaml.Node) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping", m.Line, what)
	}
	var unknown *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		var dst **yaml.Node
		for name, p := range known {
			if strings.EqualFold(k.Value, name) {
				dst = p
				break
			}
		}
		if dst == nil {
			if unknown == nil {
				unknown = k
			}
			continue
		}
		*dst = v
	}
	if unknown != nil {
		names := make([]string, 0, len(known))
		for name := range known {
			names = append(names, name)
		}
		slices.Sort(names)
		return fmt.Errorf("line %d: unknown field %q in %s (known: %s): the original Doorman ignores unknown fields; Sluice refuses them, so that a misspelt field does not silently take its default",
			unknown.Line, unknown.Value, what, strings.Join(names, ", "))
	}
	return nil
}

func parseTemplate(node *yaml.Node) (t Template, hasAlgorithm bool, err error) {
	var glob, capacity, safe, desc, algo *yaml.Node
	ferr := fields("a template", node, map[string]**yaml.Node{
		"identifier_glob": &glob, "capacity": &capacity, "safe_capacity": &safe,
		"description": &desc, "algorithm": &algo,
	})
	if glob != nil {
		if err := scalar(glob, "identifier_glob", &t.IdentifierGlob); err != nil {
			return t, false, err
		}
	}
	if ferr != nil {
		return t, false, ferr
	}
	if capacity == nil || isNull(capacity) {
		return t, false, errors.New("capacity is missing, must be a number >= 0")
	}
	if err := scalar(capacity, "capacity", &t.Capacity); err != nil {
		return t, false, err
	}
	if safe != nil && !isNull(safe) {
		var v float64
		if err := scalar(safe, "safe_capacity", &v); err != nil {
			return t, false, err
		}
		t.SafeCapacity = &v
	}
	if desc != nil {
		if err := scalar(desc, "description", &t.Description); err != nil {
			return t, false, err
		}
	}
	if algo == nil || isNull(algo) {
		return t, false, nil
	}
	t.Algorithm, err = parseAlgorithm(algo)
	return t, true, err
}

func parseAlgorithm(node *yaml.Node) (a Algorithm, err error) {
	var kind, lease, refresh, params, learning *yaml.Node
	if err := fields("algorithm", node, map[string]**yaml.Node{
		"kind": &kind, "lease_length": &lease, "refresh_interval": &refresh,
		"parameters": &params, "learning_mode_duration": &learning,
	}); err != nil {
		return a, err
	}
	if kind == nil || isNull(kind) {
		return a, errors.New("algorithm kind is missing: the original Doorman then takes NO_ALGORITHM, which hands every client what it asks for; Sluice wants the algorithm named")
	}
	if kind.Kind != yaml.ScalarNode {
		return a, fmt.Errorf("line %d: algorithm kind must be a name or a number", kind.Line)
	}
	if kind.Tag == "!!int" {
		var n int64
		if err := kind.Decode(&n); err != nil {
			return a, fmt.Errorf("line %d: algorithm kind: %v", kind.Line, err)
		}
		if n < 0 || n >= int64(len(kindNames)) {
			return a, fmt.Errorf("line %d: algorithm kind is %d, must be 0 to 3 (NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE, FAIR_SHARE; the original Doorman loads another number and fails when a client asks)", kind.Line, n)
		}
		a.Kind = Kind(n)
	} else if a.Kind, err = parseKind(kind.Value); err != nil {
		return a, fmt.Errorf("line %d: %w", kind.Line, err)
	}
	if lease == nil || isNull(lease) {
		return a, errors.New("algorithm lease_length is missing (the original Doorman requires it too)")
	}
	if err := integer(lease, "algorithm lease_length", &a.LeaseLength); err != nil {
		return a, err
	}
	if refresh == nil || isNull(refresh) {
		return a, errors.New("algorithm refresh_interval is missing (the original Doorman requires it too)")
	}
	if err := integer(refresh, "algorithm refresh_interval", &a.RefreshInterval); err != nil {
		return a, err
	}
	if learning != nil && !isNull(learning) {
		var v int64
		if err := integer(learning, "algorithm learning_mode_duration", &v); err != nil {
			return a, err
		}
		a.LearningModeDuration = &v
	}
	if params != nil && !isNull(params) {
		if params.Kind != yaml.SequenceNode {
			return a, fmt.Errorf("line %d: algorithm parameters must be a list of name/value pairs", params.Line)
		}
		for _, p := range params.Content {
			var name, value *yaml.Node
			if err := fields("an algorithm parameter", p, map[string]**yaml.Node{"name": &name, "value": &value}); err != nil {
				return a, err
			}
			var param Parameter
			if name == nil {
				return a, fmt.Errorf("line %d: algorithm parameter has no name", p.Line)
			}
			if err := scalar(name, "algorithm parameter name", &param.Name); err != nil {
				return a, err
			}
			if value != nil && !isNull(value) {
				if err := scalar(value, "algorithm parameter value", &param.Value); err != nil {
					return a, err
				}
			}
			a.Parameters = append(a.Parameters, param)
		}
	}
	return a, nil
}

// scalar decodes a scalar node into v, naming the field on failure.
func scalar(n *yaml.Node, field string, v any) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s must be a single value", n.Line, field)
	}
	if err := n.Decode(v); err != nil {
		return fmt.Errorf("line %d: %s is %q, not a %s", n.Line, field, n.Value, typeName(v))
	}
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case *float64:
		return "number"
	case *string:
		return "string"
	}
	return fmt.Sprintf("%T", v)
}

// integer decodes a whole number of seconds, written as an integer or as
// an integral float (60 or 60.0: the original's JSON decoding takes both).
func integer(n *yaml.Node, field string, v *int64) error {
	var f float64
	if err := scalar(n, field, &f); err != nil {
		return err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("line %d: %s is %s, must be a whole number of seconds", n.Line, field, n.Value)
	}
	*v = int64(f)
	return nil
}
