package slowtest

import "testing"

func TestEnabledFollowsTheEnvironment(t *testing.T) {
	t.Setenv(Env, "1")
	if !Enabled() {
		t.Errorf("%s=1: Enabled() = false", Env)
	}
	for _, v := range []string{"", "0", "true"} {
		t.Setenv(Env, v)
		if Enabled() {
			t.Errorf("%s=%q: Enabled() = true, want only \"1\" to turn slow tests on", Env, v)
		}
	}
}

func TestSkip(t *testing.T) {
	t.Setenv(Env, "")
	ran := t.Run("gated", func(t *testing.T) {
		Skip(t, "for the test")
		t.Error("Skip did not skip with the slow tests off")
	})
	if !ran {
		t.Error("the gated subtest failed")
	}
}
