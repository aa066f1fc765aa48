package leasing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"time"

	"gopkg.in/yaml.v3"
)

// Kind names an algorithm that divides a resource's capacity between its
// clients. The values are those of the wire enum doorman.Algorithm.Kind.
type Kind int32

const (
	// NoAlgorithm gives every client what it wants and ignores capacity.
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

var kindNames = map[Kind]string{
	NoAlgorithm:       "NO_ALGORITHM",
	Static:            "STATIC",
	ProportionalShare: "PROPORTIONAL_SHARE",
	FairShare:         "FAIR_SHARE",
}

// String returns the configuration name of k, e.g. "FAIR_SHARE".
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int32(k))
}

// ParseKind returns the Kind named s ("NO_ALGORITHM", "STATIC",
// "PROPORTIONAL_SHARE" or "FAIR_SHARE").
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if name == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm kind %q (want NO_ALGORITHM, STATIC, PROPORTIONAL_SHARE or FAIR_SHARE)", s)
}

// Parameter is a named algorithm parameter. The built-in algorithms take
// none; parameters are kept so configurations of the original load.
type Parameter struct {
	// Name names the parameter.
	Name string `yaml:"name"`
	// Value is the parameter's value, as text.
	Value string `yaml:"value,omitempty"`
}

// Algorithm configures how a resource's capacity is divided and the leases
// handed out for it.
type Algorithm struct {
	// Kind is the dividing algorithm.
	Kind Kind
	// LeaseLength is how long a lease lasts, in whole seconds (> 0).
	LeaseLength int64
	// RefreshInterval is how often clients should renew, in whole seconds
	// (> 0 and <= LeaseLength).
	RefreshInterval int64
	// LearningModeDuration is how long after the server starts it hands
	// back what clients report they have, in seconds. Nil means
	// LeaseLength; 0 means no learning mode.
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
	// Capacity is the total capacity (>= 0); for Static the per-client
	// ceiling.
	Capacity float64
	// SafeCapacity is what clients in safe mode may use when they cannot
	// renew: negative means unlimited, 0 means block. Nil means dynamic:
	// capacity divided by the number of clients the server knows.
	SafeCapacity *float64
	// Description is free text shown on the status page.
	Description string
	// Algorithm divides the capacity.
	Algorithm Algorithm
}

// LearningDuration returns the learning mode duration the template asks
// for: LearningModeDuration if set, otherwise LeaseLength.
func (t *Template) LearningDuration() time.Duration {
	if t.Algorithm.LearningModeDuration != nil {
		return time.Duration(*t.Algorithm.LearningModeDuration) * time.Second
	}
	return time.Duration(t.Algorithm.LeaseLength) * time.Second
}

// Validate reports the first thing wrong with t.
func (t *Template) Validate() error {
	if t.IdentifierGlob == "" {
		return errors.New("identifier_glob is empty")
	}
	if _, err := path.Match(t.IdentifierGlob, ""); err != nil {
		return fmt.Errorf("identifier_glob %q is not a valid glob: %v", t.IdentifierGlob, err)
	}
	if math.IsNaN(t.Capacity) || math.IsInf(t.Capacity, 0) || t.Capacity < 0 {
		return fmt.Errorf("capacity is %v, must be a finite number >= 0", t.Capacity)
	}
	if t.SafeCapacity != nil && (math.IsNaN(*t.SafeCapacity) || math.IsInf(*t.SafeCapacity, 0)) {
		return fmt.Errorf("safe_capacity is %v, must be finite (negative means unlimited)", *t.SafeCapacity)
	}
	a := &t.Algorithm
	if _, ok := kindNames[a.Kind]; !ok {
		return fmt.Errorf("unknown algorithm kind %d", int32(a.Kind))
	}
	if a.LeaseLength <= 0 || a.LeaseLength > MaxLeaseLength {
		return fmt.Errorf("algorithm lease_length is %d, must be > 0 and <= %d seconds (30 days)", a.LeaseLength, int64(MaxLeaseLength))
	}
	if a.RefreshInterval <= 0 || a.RefreshInterval > a.LeaseLength {
		return fmt.Errorf("algorithm refresh_interval is %d, must be > 0 and <= lease_length (%d)", a.RefreshInterval, a.LeaseLength)
	}
	if a.LearningModeDuration != nil && (*a.LearningModeDuration < 0 || *a.LearningModeDuration > MaxLeaseLength) {
		return fmt.Errorf("algorithm learning_mode_duration is %d, must be >= 0 and <= %d seconds (30 days)", *a.LearningModeDuration, int64(MaxLeaseLength))
	}
	return nil
}

// MaxLeaseLength bounds lease_length and learning_mode_duration, in
// seconds. A lease is a promise about the near future: one that outlives
// a month is a misconfiguration (or a unit mistake), and the bound keeps
// every expiry far from time.Duration's range.
const MaxLeaseLength = 30 * 24 * 60 * 60

// Config is a resource repository: the ordered list of templates a server
// matches resource identifiers against (exact identifier first, then globs
// in order; a "*" template must come last).
type Config struct {
	Resources []Template
}

// Validate reports the first thing wrong with c, naming the template.
func (c *Config) Validate() error {
	seen := make(map[string]int, len(c.Resources))
	for i := range c.Resources {
		t := &c.Resources[i]
		if err := t.Validate(); err != nil {
			return fmt.Errorf("leasing: template %d (%q): %w", i, t.IdentifierGlob, err)
		}
		if j, dup := seen[t.IdentifierGlob]; dup {
			return fmt.Errorf("leasing: template %d (%q): identifier_glob already used by template %d", i, t.IdentifierGlob, j)
		}
		seen[t.IdentifierGlob] = i
		if t.IdentifierGlob == "*" && i != len(c.Resources)-1 {
			return fmt.Errorf("leasing: template %d (%q): the \"*\" template must be the last one, but %d template(s) follow it", i, t.IdentifierGlob, len(c.Resources)-1-i)
		}
	}
	return nil
}

// Match returns the template for resource id: the first template whose
// identifier_glob equals id, otherwise the first whose glob matches it, or
// nil when none does.
func (c *Config) Match(id string) *Template {
	for i := range c.Resources {
		if c.Resources[i].IdentifierGlob == id {
			return &c.Resources[i]
		}
	}
	for i := range c.Resources {
		g := c.Resources[i].IdentifierGlob
		if g == "*" {
			return &c.Resources[i]
		}
		if ok, _ := path.Match(g, id); ok {
			return &c.Resources[i]
		}
	}
	return nil
}

// The YAML shape of the original Doorman's configuration file.
type yamlConfig struct {
	Resources []yamlTemplate `yaml:"resources"`
}

type yamlTemplate struct {
	IdentifierGlob string         `yaml:"identifier_glob"`
	Capacity       *float64       `yaml:"capacity"`
	SafeCapacity   *float64       `yaml:"safe_capacity"`
	Description    string         `yaml:"description"`
	Algorithm      *yamlAlgorithm `yaml:"algorithm"`
}

type yamlAlgorithm struct {
	Kind                 string      `yaml:"kind"`
	LeaseLength          int64       `yaml:"lease_length"`
	RefreshInterval      int64       `yaml:"refresh_interval"`
	Parameters           []Parameter `yaml:"parameters"`
	LearningModeDuration *int64      `yaml:"learning_mode_duration"`
}

// ParseConfig reads a YAML resource repository in the original Doorman's
// format and validates it. Errors name the offending template.
func ParseConfig(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var y yamlConfig
	if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("leasing: malformed configuration: %w", err)
	}
	c := &Config{Resources: make([]Template, 0, len(y.Resources))}
	for i, yt := range y.Resources {
		name := fmt.Sprintf("leasing: template %d (%q)", i, yt.IdentifierGlob)
		if yt.Capacity == nil {
			return nil, fmt.Errorf("%s: capacity is missing", name)
		}
		if yt.Algorithm == nil {
			return nil, fmt.Errorf("%s: algorithm is missing", name)
		}
		kind, err := ParseKind(yt.Algorithm.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.Resources = append(c.Resources, Template{
			IdentifierGlob: yt.IdentifierGlob,
			Capacity:       *yt.Capacity,
			SafeCapacity:   yt.SafeCapacity,
			Description:    yt.Description,
			Algorithm: Algorithm{
				Kind:                 kind,
				LeaseLength:          yt.Algorithm.LeaseLength,
				RefreshInterval:      yt.Algorithm.RefreshInterval,
				LearningModeDuration: yt.Algorithm.LearningModeDuration,
				Parameters:           yt.Algorithm.Parameters,
			},
		})
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadConfig reads and validates the YAML resource repository in file.
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("leasing: reading configuration: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, file)
	}
	return c, nil
}
