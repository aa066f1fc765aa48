package balancing

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"
)

// memberNames returns n distinct host:port names.
func memberNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("10.%d.%d.%d:4000", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	return names
}

func mustRing(t testing.TB, names []string, weights []float64) *Ring {
	t.Helper()
	r, err := NewRing(names, weights)
	if err != nil {
		t.Fatalf("NewRing: %v", err)
	}
	return r
}

// testKeys is the number of keys "key-0".."key-<testKeys-1>" the
// distribution tests home.
const testKeys = 100_000

// homeNames returns the name of the home member of each test key.
func homeNames(r *Ring, names []string) []string {
	homes := make([]string, testKeys)
	for k := range homes {
		homes[k] = names[r.Home(KeyHash(fmt.Sprintf("key-%d", k)))]
	}
	return homes
}

// shares returns the fraction of test keys homed on each member.
func shares(r *Ring) []float64 {
	s := make([]float64, r.Len())
	for k := range testKeys {
		s[r.Home(KeyHash(fmt.Sprintf("key-%d", k)))] += 1.0 / testKeys
	}
	return s
}

func TestNewRingErrors(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		weights []float64
		want    []string // substrings the message must hold
	}{
		{"nil names", nil, nil, []string{"no members", "at least 1"}},
		{"no names", []string{}, []float64{}, []string{"no members", "at least 1"}},
		{"empty name", []string{"a:1", "b:1", ""}, nil, []string{"member 2", "empty name", "non-empty"}},
		{"duplicate name", []string{"a:1", "b:1", "a:1"}, nil, []string{`member 2 ("a:1")`, "same name as member 0", "unique"}},
		{"short weights", []string{"a:1", "b:1"}, []float64{1}, []string{"1 weights for 2 members", "one weight per member"}},
		{"long weights", []string{"a:1"}, []float64{1, 2}, []string{"2 weights for 1 members", "one weight per member"}},
		{"empty weights", []string{"a:1"}, []float64{}, []string{"0 weights for 1 members"}},
		{"negative weight", []string{"a:1", "b:1", "c:1", "10.0.0.1:80"}, []float64{1, 1, 1, -1},
			[]string{`balancing: ring member 3 ("10.0.0.1:80") has weight -1, must be finite and > 0`}},
		{"zero weight", []string{"a:1", "b:1"}, []float64{0, 1}, []string{`member 0 ("a:1") has weight 0`, "finite and > 0"}},
		{"NaN weight", []string{"a:1", "b:1"}, []float64{1, math.NaN()}, []string{`member 1 ("b:1") has weight NaN`}},
		{"+Inf weight", []string{"a:1", "b:1"}, []float64{math.Inf(1), 1}, []string{`member 0 ("a:1") has weight +Inf`}},
		{"-Inf weight", []string{"a:1", "b:1"}, []float64{1, math.Inf(-1)}, []string{`member 1 ("b:1") has weight -Inf`}},
		{"too many members", make([]string, MaxRingPoints+1), nil, []string{"1048577 members", "at most MaxRingPoints (1048576)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRing(tt.names, tt.weights)
			if err == nil {
				t.Fatalf("NewRing = %d members, nil error; want an error", r.Len())
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "balancing: ") {
				t.Errorf("error %q does not start with the package name", msg)
			}
			if msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("error %q is not lower-case", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestKeyHashFixed(t *testing.T) {
	// Computed once from the definition: FNV-1a 64 ("" is the offset basis
	// 0xcbf29ce484222325; "a" and "foobar" are FNV's published vectors
	// 0xaf63dc4c8601ec8c and 0x85944171f73967e8), then murmur3's fmix64.
	// Checked by hand against a separate Python implementation. A change
	// here moves every key in every deployed client: do not update these
	// values to make the test pass.
	tests := []struct {
		key       string
		fnv, want uint64
	}{
		{"", 0xcbf29ce484222325, 0xefd01f60ba992926},
		{"a", 0xaf63dc4c8601ec8c, 0x82a2a958a9bece5b},
		{"foobar", 0x85944171f73967e8, 0x2c22194922d1672b},
		{"user-1234", 0x5510577624a45805, 0x2bb2f09caf957dc2},
		{"0123456789abcdef", 0x2e373913e5ad677d, 0x9fe524d33625dec6},
	}
	for _, tt := range tests {
		if got := fmix64(tt.fnv); got != tt.want {
			t.Errorf("fmix64(%#x) = %#x, want %#x", tt.fnv, got, tt.want)
		}
		if got := KeyHash(tt.key); got != tt.want {
			t.Errorf("KeyHash(%q) = %#x, want %#x", tt.key, got, tt.want)
		}
		if got := hash([]byte(tt.key)); got != tt.want {
			t.Errorf("hash([]byte(%q)) = %#x, want %#x", tt.key, got, tt.want)
		}
	}
	if got := fmix64(0); got != 0 {
		t.Errorf("fmix64(0) = %#x, want 0", got)
	}
}

func TestKeyHashIsFNV1aThenFmix(t *testing.T) {
	for k := range 1000 {
		key := fmt.Sprintf("shard/%d", k*7919)
		f := fnv.New64a()
		f.Write([]byte(key))
		if got, want := KeyHash(key), fmix64(f.Sum64()); got != want {
			t.Fatalf("KeyHash(%q) = %#x, want fmix64(hash/fnv 64a) = %#x", key, got, want)
		}
	}
}

func TestNewRingDeterministic(t *testing.T) {
	names := memberNames(25)
	weights := make([]float64, len(names))
	for i := range weights {
		weights[i] = float64(1 + i%4)
	}
	a, b := mustRing(t, names, weights), mustRing(t, slices.Clone(names), slices.Clone(weights))
	if a.Len() != b.Len() || !slices.Equal(a.pos, b.pos) || !slices.Equal(a.owners, b.owners) {
		t.Fatal("two rings built from the same names and weights differ")
	}
	if !slices.IsSorted(a.pos) {
		t.Fatal("ring positions are not sorted")
	}
	// Every point is where the documentation puts it: point j of a member
	// at KeyHash(name + "#" + j), rebuilt here with fmt and a naive sort.
	counts, _ := pointCounts(len(names), weights)
	var want []point
	for i, name := range names {
		for j := range counts[i] {
			want = append(want, point{KeyHash(fmt.Sprintf("%s#%d", name, j)), int32(i)})
		}
	}
	slices.SortFunc(want, func(x, y point) int {
		if x.pos != y.pos {
			return cmp.Compare(x.pos, y.pos)
		}
		return cmp.Compare(x.owner, y.owner)
	})
	if len(want) != a.Points() {
		t.Fatalf("Points = %d, want %d", a.Points(), len(want))
	}
	for i, p := range want {
		if a.pos[i] != p.pos || a.owners[i] != p.owner {
			t.Fatalf("point %d is (%#x, member %d), want (%#x, member %d)", i, a.pos[i], a.owners[i], p.pos, p.owner)
		}
	}
}

func TestSortPointsBreaksTiesByMember(t *testing.T) {
	pts := []point{{5, 3}, {2, 1}, {5, 0}, {5, 2}, {1, 9}}
	sortPoints(pts)
	want := []point{{1, 9}, {2, 1}, {5, 0}, {5, 2}, {5, 3}}
	if !slices.Equal(pts, want) {
		t.Errorf("sortPoints = %v, want %v", pts, want)
	}
}

func TestPointCounts(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		weights []float64
		want    []int // nil: only the total and the minimum are checked
		total   int
	}{
		{"nil weights", 3, nil, []int{160, 160, 160}, 480},
		{"equal weights", 2, []float64{0.5, 0.5}, []int{160, 160}, 320},
		// round(480/7 = 68.57), round(960/7 = 137.14), round(1920/7 = 274.29)
		{"1 2 4", 3, []float64{1, 2, 4}, []int{69, 137, 274}, 480},
		{"huge and tiny", 2, []float64{1e9, 1}, []int{320, 1}, 321},
		{"tiny weights", 2, []float64{5e-324, 5e-324}, []int{160, 160}, 320},
		{"sum overflows", 3, []float64{math.MaxFloat64, math.MaxFloat64, 1}, []int{240, 240, 1}, 481},
		// 160 * 10000 points pass the cap: each keeps 1 and shares
		// 2^20 - 10000 in proportion: 1 + floor(159 * 1038576 / 1590000) = 104.
		{"capped equal", 10000, nil, nil, 10000 * 104},
		// The heavy member would have round(160*7000*1e9/(1e9+6999)) = 1119992;
		// capped, it has everything the 6999 others' single points leave.
		{"capped heavy", 7000, append([]float64{1e9}, slices.Repeat([]float64{1}, 6999)...), nil, MaxRingPoints},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts, total := pointCounts(tt.n, tt.weights)
			if tt.want != nil && !slices.Equal(counts, tt.want) {
				t.Errorf("counts = %v, want %v", counts, tt.want)
			}
			sum := 0
			for i, c := range counts {
				if c < 1 {
					t.Fatalf("member %d has %d points, want >= 1", i, c)
				}
				sum += c
			}
			if sum != total || total != tt.total {
				t.Errorf("total = %d (counts add to %d), want %d", total, sum, tt.total)
			}
			if total > MaxRingPoints {
				t.Errorf("total = %d, more than MaxRingPoints", total)
			}
		})
	}
}

func TestRingHugeWeights(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		weights []float64
	}{
		{"1e9 and 1", memberNames(2), []float64{1e9, 1}},
		{"max float and tiny", memberNames(3), []float64{math.MaxFloat64, math.MaxFloat64, math.SmallestNonzeroFloat64}},
		{"2000 members", memberNames(2000), nil},
		{"2000 members one huge", memberNames(2000), append([]float64{1e12}, slices.Repeat([]float64{1}, 1999)...)},
		{"capped heavy", memberNames(7000), append(slices.Repeat([]float64{1}, 6999), 1e9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRing(t, tt.names, tt.weights)
			if r.Len() != len(tt.names) {
				t.Fatalf("Len = %d, want %d", r.Len(), len(tt.names))
			}
			if r.Points() > MaxRingPoints {
				t.Fatalf("Points = %d, more than MaxRingPoints", r.Points())
			}
			per := make([]int, r.Len())
			for _, o := range r.owners {
				per[o]++
			}
			for i, c := range per {
				if c < 1 {
					t.Fatalf("member %d has no points", i)
				}
			}
			visited := 0
			r.Walk(KeyHash("any key"), func(int) bool { visited++; return true })
			if visited != r.Len() {
				t.Errorf("Walk visited %d members, want %d", visited, r.Len())
			}
			t.Logf("%d members, %d points, fewest per member %d, most %d", r.Len(), r.Points(), slices.Min(per), slices.Max(per))
		})
	}
}

func TestRingHome(t *testing.T) {
	r := mustRing(t, memberNames(5), nil)
	last := len(r.pos) - 1
	tests := []struct {
		name string
		h    uint64
		want int32
	}{
		{"before the first point", r.pos[0] - 1, r.owners[0]},
		{"at the first point", r.pos[0], r.owners[0]},
		{"just after a point", r.pos[10] + 1, r.owners[11]},
		{"at the last point", r.pos[last], r.owners[last]},
		{"after the last point wraps", r.pos[last] + 1, r.owners[0]},
		{"zero", 0, r.owners[0]},
		{"max", math.MaxUint64, r.owners[0]},
	}
	if r.pos[last] == math.MaxUint64 || r.pos[0] == 0 {
		t.Fatal("test assumes no point at 0 or MaxUint64")
	}
	for _, tt := range tests {
		if got := r.Home(tt.h); got != int(tt.want) {
			t.Errorf("%s: Home(%#x) = %d, want %d", tt.name, tt.h, got, tt.want)
		}
	}
}

func TestZeroRing(t *testing.T) {
	var r Ring
	if r.Len() != 0 || r.Points() != 0 {
		t.Errorf("zero Ring: Len %d, Points %d, want 0, 0", r.Len(), r.Points())
	}
	if got := r.Home(42); got != -1 {
		t.Errorf("zero Ring: Home = %d, want -1", got)
	}
	r.Walk(42, func(m int) bool { t.Errorf("zero Ring: Walk visited %d", m); return true })
}

// walkOrder is Walk's documented order computed naively: the distinct
// owners of the points from h's home onwards, round the ring once.
func walkOrder(r *Ring, h uint64) []int {
	var order []int
	seen := make(map[int]bool)
	start := r.search(h)
	for k := range len(r.pos) {
		m := int(r.owners[(start+k)%len(r.pos)])
		if !seen[m] {
			seen[m] = true
			order = append(order, m)
		}
	}
	return order
}

func TestRingWalk(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		weights []float64
	}{
		{"one member", 1, nil},
		{"two members", 2, nil},
		{"ten members", 10, nil},
		{"skewed weights", 6, []float64{100, 1, 1, 1, 1, 0.01}},
		{"64 members", 64, nil},
		{"65 members", 65, nil},
		{"512 members (stack bitset)", 512, nil},
		{"513 members (heap bitset)", 513, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRing(t, memberNames(tt.n), tt.weights)
			for k := range 50 {
				h := KeyHash(fmt.Sprintf("walk-%d", k))
				var got []int
				r.Walk(h, func(m int) bool { got = append(got, m); return true })
				if len(got) != tt.n {
					t.Fatalf("Walk(%#x) visited %d members, want %d", h, len(got), tt.n)
				}
				if got[0] != r.Home(h) {
					t.Fatalf("Walk(%#x) visited %d first, want the home %d", h, got[0], r.Home(h))
				}
				seen := make([]bool, tt.n)
				for _, m := range got {
					if seen[m] {
						t.Fatalf("Walk(%#x) visited member %d twice: %v", h, m, got)
					}
					seen[m] = true
				}
				if want := walkOrder(r, h); !slices.Equal(got, want) {
					t.Fatalf("Walk(%#x) order %v, want ring order %v", h, got, want)
				}
			}
		})
	}
}

func TestRingWalkStops(t *testing.T) {
	r := mustRing(t, memberNames(10), nil)
	h := KeyHash("stop")
	want := walkOrder(r, h)
	for stopAfter := 1; stopAfter <= 10; stopAfter++ {
		var got []int
		r.Walk(h, func(m int) bool {
			got = append(got, m)
			return len(got) < stopAfter
		})
		if !slices.Equal(got, want[:stopAfter]) {
			t.Errorf("stopping after %d: visited %v, want %v", stopAfter, got, want[:stopAfter])
		}
	}
}

func TestRingBalance(t *testing.T) {
	r := mustRing(t, memberNames(10), nil)
	s := shares(r)
	lo, hi := slices.Min(s), slices.Max(s)
	t.Logf("10 equal members, %d keys: home shares min %.2f%%, max %.2f%%", testKeys, 100*lo, 100*hi)
	for i, v := range s {
		if v < 0.07 || v > 0.13 {
			t.Errorf("member %d homes %.2f%% of keys, want 7%%..13%%", i, 100*v)
		}
	}
}

func TestRingWeights(t *testing.T) {
	weights := []float64{1, 2, 4}
	r := mustRing(t, memberNames(3), weights)
	s := shares(r)
	for i, w := range weights {
		want := w / 7
		t.Logf("weight %v: %d points, homes %.2f%% of keys (ideal %.2f%%)", w, pointsOf(r, i), 100*s[i], 100*want)
		if math.Abs(s[i]-want) > 0.03 {
			t.Errorf("member %d (weight %v) homes %.2f%% of keys, want %.2f%% +- 3 points", i, w, 100*s[i], 100*want)
		}
	}
}

func pointsOf(r *Ring, member int) int {
	c := 0
	for _, o := range r.owners {
		if int(o) == member {
			c++
		}
	}
	return c
}

func TestRingKeyMovement(t *testing.T) {
	names := memberNames(11)
	ten := names[:10]
	before := homeNames(mustRing(t, ten, nil), ten)

	t.Run("remove a member", func(t *testing.T) {
		removed := ten[3]
		rest := slices.Delete(slices.Clone(ten), 3, 4)
		after := homeNames(mustRing(t, rest, nil), rest)
		moved := 0
		for k := range before {
			if before[k] == after[k] {
				continue
			}
			moved++
			if before[k] != removed {
				t.Fatalf("key-%d moved from %s to %s, but only %s's keys may move", k, before[k], after[k], removed)
			}
		}
		share := float64(moved) / testKeys
		t.Logf("removing 1 of 10 members moved %.2f%% of keys", 100*share)
		if share > 0.12 {
			t.Errorf("removing 1 of 10 members moved %.2f%% of keys, want <= 12%%", 100*share)
		}
	})

	t.Run("add a member", func(t *testing.T) {
		added := names[10]
		after := homeNames(mustRing(t, names, nil), names)
		moved := 0
		for k := range before {
			if before[k] == after[k] {
				continue
			}
			moved++
			if after[k] != added {
				t.Fatalf("key-%d moved from %s to %s, but keys may move only to %s", k, before[k], after[k], added)
			}
		}
		share := float64(moved) / testKeys
		t.Logf("adding an 11th member moved %.2f%% of keys", 100*share)
		if share > 0.12 {
			t.Errorf("adding an 11th member moved %.2f%% of keys, want <= 12%%", 100*share)
		}
	})
}

func TestRingAllocs(t *testing.T) {
	r := mustRing(t, memberNames(10), nil)
	h := KeyHash("0123456789abcdef")
	sink := 0
	if a := testing.AllocsPerRun(1000, func() { sink += r.Home(h) }); a != 0 {
		t.Errorf("Home: %v allocs per call, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { sink += int(KeyHash("0123456789abcdef")) }); a != 0 {
		t.Errorf("KeyHash: %v allocs per call, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		n := 0
		r.Walk(h, func(m int) bool { sink += m; n++; return n < 3 })
	}); a != 0 {
		t.Errorf("Walk of 3 members: %v allocs per call, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		r.Walk(h, func(m int) bool { sink += m; return true })
	}); a != 0 {
		t.Errorf("Walk of every member: %v allocs per call, want 0", a)
	}
	big := mustRing(t, memberNames(walkStackMembers+1), nil)
	if a := testing.AllocsPerRun(100, func() {
		big.Walk(h, func(m int) bool { sink += m; return true })
	}); a > 1 {
		t.Errorf("Walk of %d members: %v allocs per call, want <= 1", big.Len(), a)
	}
	_ = sink
}

var benchSink int

func BenchmarkKeyHash(b *testing.B) {
	b.ReportAllocs()
	key := "0123456789abcdef" // 16 bytes
	var h uint64
	for b.Loop() {
		h += KeyHash(key)
	}
	benchSink = int(h)
}

func BenchmarkRingHome(b *testing.B) {
	r := mustRing(b, memberNames(10), nil)
	hs := keyHashes(1024)
	b.ReportAllocs()
	i, sum := 0, 0
	for b.Loop() {
		sum += r.Home(hs[i&1023])
		i++
	}
	benchSink = sum
}

func BenchmarkRingWalk(b *testing.B) {
	r := mustRing(b, memberNames(10), nil)
	hs := keyHashes(1024)
	b.ReportAllocs()
	i, sum := 0, 0
	for b.Loop() {
		n := 0
		r.Walk(hs[i&1023], func(m int) bool { sum += m; n++; return n < 3 })
		i++
	}
	benchSink = sum
}

func BenchmarkNewRing(b *testing.B) {
	names := memberNames(100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRing(names, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func keyHashes(n int) []uint64 {
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = KeyHash(fmt.Sprintf("key-%d", i))
	}
	return hs
}
