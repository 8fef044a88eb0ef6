package immutable

import "testing"

func TestVectorIdentity(t *testing.T) {
	var empty Vector[int]
	e := empty.Edit()
	for i := range 100 {
		e.Append(i)
	}
	v1 := e.Done()
	if v1.Identity() != v1.Identity() {
		t.Fatal("identity of one vector differs from itself")
	}
	e2 := v1.Edit()
	e2.Set(5, -1)
	v2 := e2.Done()
	if v1.Identity() == v2.Identity() {
		t.Fatal("a changed vector kept its identity")
	}
	if v1.Get(5) != 5 || v2.Get(5) != -1 {
		t.Fatal("edit leaked into the original")
	}
	if n := testing.AllocsPerRun(100, func() { _ = v1.Identity() }); n != 0 {
		t.Fatalf("Identity allocates %v times", n)
	}
}
